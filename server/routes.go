package server

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/server/internal/oip"
)

// routes builds the router: one handler per endpoint, each returning its
// error through adapt.
//
// Middleware, outermost first: the request metrics (mw_metrics.go), the
// inference protocol's error scope (oip.Scope), the connection tracker (shutdown deadlines), the request ID and
// request-scoped logger, the refusal counter and sampled log (errors.go), the Host allow-list and the cross-origin check
// (mw_origin.go), the credential (one Bearer header or a dashboard
// session: mw_auth.go), the body limit. Each route group then names who
// may use it: the dashboard's reads take the API key or any dashboard
// session; the rest of the API the API key alone; the management routes
// the dashboard's buttons use the management key or a session made with
// it; other management routes the management key alone (403 without
// --ui-management, 401 without the key). No timeout middleware: streams
// run as long as they are read.
func (s *Server) routes() http.Handler {
	a := newAuth(s.cfg, s.log)
	s.auth = a
	v2 := s.oipHandlers()
	r := chi.NewRouter()
	r.Use(s.met.http.middleware) // outermost: every answer is measured, refusals included
	r.Use(oip.Scope)             // errors under /v2 in the protocol's shape, the refusals below included
	r.Use(trackRequest, requestID(s.log), s.refuse.middleware, checkHost(s.hosts), checkOrigin(s.origins),
		a.authenticate, s.limitBody)
	// Unknown routes and methods need the API key too, so they say nothing
	// to a client without one.
	r.NotFound(a.dashboardRead()(adapt(func(w http.ResponseWriter, r *http.Request) error {
		return NotFound("no route for %s %s", r.Method, r.URL.Path)
	})).ServeHTTP)
	r.MethodNotAllowed(a.dashboardRead()(adapt(func(w http.ResponseWriter, r *http.Request) error {
		return &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + r.URL.Path}
	})).ServeHTTP)

	// Always open: probes, the dashboard's static shell (it holds no data;
	// CONTRACT.md ui.shell) and the sign-in itself.
	r.Get("/healthz", adapt(s.handleHealth))
	r.Get("/readyz", adapt(s.handleReady))
	ui := uiHandler()
	r.Get("/", ui.ServeHTTP)
	r.Get("/ui/*", ui.ServeHTTP)
	r.Get("/v2/health/live", adapt(v2.Live)) // the protocol's probes (CONTRACT.md oip.live, oip.ready), HEAD as GET
	r.Head("/v2/health/live", adapt(v2.Live))
	r.Get("/v2/health/ready", adapt(v2.Ready))
	r.Head("/v2/health/ready", adapt(v2.Ready))
	r.Post("/v1/ui/session", adapt(a.handleSignIn))
	r.Delete("/v1/ui/session", adapt(a.handleSignOut))

	// The dashboard's reads: the API key or a dashboard session.
	r.Group(func(r chi.Router) {
		r.Use(a.dashboardRead())
		r.Get("/v1/models", adapt(s.handleListModels))
		r.Get("/v1/events", adapt(s.handleEvents)) // a stream: no timeout middleware here either
		r.Get("/v1/catalogue", adapt(s.handleCatalogue))
		r.Get("/v1/ui/config", adapt(s.handleUIConfig))
		r.Post("/v2/repository/index", adapt(v2.Index)) // GET /v1/models's snapshot
	})

	// The rest of the API: the API key as a Bearer token only.
	r.Group(func(r chi.Router) {
		r.Use(a.apiRead())
		r.Get("/metrics", s.met.handler().ServeHTTP)
		r.Get("/v1/models/{id}", adapt(s.handleGetModel))
		r.Post("/v1/models/{id}/infer", adapt(s.handleInfer))
		r.Post("/v1/audio/speech", adapt(s.handleSpeech))
		r.Post("/v1/audio/transcriptions", adapt(s.handleTranscription))
		r.Post("/v1/audio/voice-activity", adapt(s.handleVoiceActivity))
		r.Post("/v1/audio/diarization", adapt(s.handleDiarization))
		r.Post("/v1/audio/speech/embedding", adapt(s.handleSpeakerEmbedding)) // speaches' route (h_embedding.go)
		r.Get("/v1/audio/voices", adapt(s.handleVoices))
		r.Post("/v1/audio/translations", adapt(s.handleTranslation))
		r.Get("/v1/realtime", adapt(s.handleRealtime)) // a WebSocket: holds its lease for the session
		// The inference protocol (internal/oip), as /v1/models/{id} and its infer.
		r.Get("/v2", adapt(v2.Server))
		r.Get("/v2/models/{id}", adapt(v2.Model))
		r.Get("/v2/models/{id}/ready", adapt(v2.ModelReady))
		r.Head("/v2/models/{id}/ready", adapt(v2.ModelReady))
		r.Post("/v2/models/{id}/infer", adapt(v2.Infer))
		// The advertised version, config_version; any other is 404 (oip.versions).
		r.Get("/v2/models/{id}/versions/{version}", adapt(v2.Model))
		r.Get("/v2/models/{id}/versions/{version}/ready", adapt(v2.ModelReady))
		r.Head("/v2/models/{id}/versions/{version}/ready", adapt(v2.ModelReady))
		r.Post("/v2/models/{id}/versions/{version}/infer", adapt(v2.Infer))
	})

	// Management the dashboard's buttons use: the management key or a
	// session made with it.
	r.Group(func(r chi.Router) {
		r.Use(a.dashboardManage())
		r.Put("/v1/models/{id}", adapt(s.handleApply))
		r.Post("/v1/models/{id}/load", adapt(s.handleLoad))
		r.Post("/v1/models/{id}/unload", adapt(s.handleUnload))
		r.Get("/v1/models/{id}/spec", adapt(s.handleGetSpec))
		r.Put("/v1/settings/models-root", adapt(s.handleSetModelsRoot))
		r.Post("/v2/repository/models/{id}/load", adapt(v2.Load)) // the same managers (internal/oip)
		r.Post("/v2/repository/models/{id}/unload", adapt(v2.Unload))
	})
	// Other management: the management key only.
	r.Group(func(r chi.Router) {
		r.Use(a.apiManage())
		r.Post("/v1/models/unload", adapt(s.handleBulkUnload))
		r.Delete("/v1/models/{id}", adapt(s.handleDelete))
		if s.fx != nil {
			r.Get("/v1/fixture/gates", adapt(s.handleListGates))
			r.Post("/v1/fixture/gates/{name}/open", adapt(s.handleOpenGate))
		}
	})
	return r
}

// limitBody bounds every request body (CONTRACT.md edge.*): a declared
// Content-Length over --max-body is refused before any read (413), one
// that does not fit the body budgets is refused at once with 503
// server_busy and Retry-After (edge.body-budget: never waited for, the
// rest of the body is dropped within refuseDrain or the connection
// closes); the body is then read through a bodyReader
// (read deadlines, edge.body-timeout and edge.body-min-rate) under
// http.MaxBytesReader. Reservations are given back when the handler
// returns.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hasBody := r.Body != nil && r.Body != http.NoBody
		rc := http.NewResponseController(w)
		// refuse answers without reading the body. net/http then reads
		// and drops what is left of it when that is at most 256 KiB (else
		// it closes the connection gracefully): that read gets refuseDrain
		// at most, and a client that sends nothing more loses the
		// connection.
		refuse := func(e *Error) {
			if hasBody {
				_ = rc.SetReadDeadline(time.Now().Add(refuseDrain))
			}
			writeError(w, r, e)
		}
		if r.ContentLength > s.cfg.MaxBody {
			refuse(tooLarge(s.cfg.MaxBody))
			return
		}
		lim := s.limits
		r = r.WithContext(context.WithValue(r.Context(), limitsKey{}, lim))
		if !hasBody {
			next.ServeHTTP(w, r)
			return
		}
		br := &bodyReader{body: r.Body, w: w, rc: rc, lim: lim, start: time.Now()}
		if n := r.ContentLength; n >= 0 {
			br.declared = true
			m := min(n, lim.threshold)
			if !lim.mem.take(m) {
				refuse(bodyBusy())
				return
			}
			br.memHeld = m
			if !lim.disk.take(n - m) {
				br.release()
				refuse(bodyBusy())
				return
			}
			br.disk = n - m
		}
		defer br.finish()
		r.Body = http.MaxBytesReader(w, br, s.cfg.MaxBody)
		next.ServeHTTP(w, r)
	})
}

// oipHandlers wires the Open Inference Protocol's adapter
// (server/internal/oip) to the runtime, the edge and the registry: each
// /v2 route does what its /v1 twin does, through the same code.
func (s *Server) oipHandlers() *oip.Handlers {
	return oip.New(oip.Host{
		Runtime:        s.rt,
		Version:        BuildInfo().Version,
		Stopping:       s.stopping.Load,
		StartupModels:  s.startupModels,
		ModelID:        modelID,
		Decode:         decodeStrict,
		DecodeOptional: decodeOptional,
		Lease:          s.taskLease,
		WriteTask:      writeTask,
		RequestID:      requestIDFrom,
		FromRuntime:    func(err error) error { return fromRuntime(err) },
		Load: func(ctx context.Context, id string) error {
			if _, err := s.reg.Load(ctx, id); err != nil {
				return manageErr(err)
			}
			return nil
		},
		Unload: func(ctx context.Context, id string) error {
			if _, err := s.reg.Unload(ctx, id); err != nil {
				return manageErr(err)
			}
			return nil
		},
	})
}
