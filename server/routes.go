package server

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/oip"
)

// routes builds the router: one handler per endpoint, each returning its
// error through adapt.
//
// Middleware, outermost first: the request metrics (internal/metrics), the
// inference protocol's error scope (oip.Scope), the connection tracker (shutdown deadlines), the request ID and
// request-scoped logger, the refusal counter and sampled log (errors.go), the Host allow-list and the cross-origin check
// (internal/edge), the credential (one Bearer header or a dashboard
// session: internal/auth), the body limit (internal/edge). Each route group then names who
// may use it: the dashboard's reads take the API key or any dashboard
// session; the rest of the API the API key alone; the management routes
// the dashboard's buttons use the management key or a session made with
// it; other management routes the management key alone (403 without
// --ui-management, 401 without the key). No timeout middleware: streams
// run as long as they are read.
func (s *Server) routes() http.Handler {
	a := s.newAuth()
	s.auth = a
	v2 := s.oipHandlers()
	oa := s.openaiHandlers()
	r := chi.NewRouter()
	r.Use(s.met.Middleware) // outermost: every answer is measured, refusals included
	r.Use(oip.Scope)        // errors under /v2 in the protocol's shape, the refusals below included
	r.Use(edge.Track, requestID(s.log), s.refuse.middleware, s.edge.CheckHost, s.edge.CheckOrigin,
		a.Authenticate, s.edge.LimitBody)
	// Unknown routes and methods need the API key too, so they say nothing
	// to a client without one.
	r.NotFound(a.DashboardRead()(adapt(func(w http.ResponseWriter, r *http.Request) error {
		return NotFound("no route for %s %s", r.Method, r.URL.Path)
	})).ServeHTTP)
	r.MethodNotAllowed(a.DashboardRead()(adapt(func(w http.ResponseWriter, r *http.Request) error {
		return &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + r.URL.Path}
	})).ServeHTTP)

	// Always open: probes, the dashboard's static shell (it holds no data;
	// CONTRACT.md ui.shell) and the sign-in itself.
	r.Get("/healthz", adapt(s.handleHealth)) // HEAD as GET too: load balancers probe with either
	r.Head("/healthz", adapt(s.handleHealth))
	r.Get("/readyz", adapt(s.handleReady))
	r.Head("/readyz", adapt(s.handleReady))
	ui := uiHandler()
	r.Get("/", ui.ServeHTTP)
	r.Get("/ui/*", ui.ServeHTTP)
	r.Get("/v2/health/live", adapt(v2.Live)) // the protocol's probes (CONTRACT.md oip.live, oip.ready), HEAD as GET
	r.Head("/v2/health/live", adapt(v2.Live))
	r.Get("/v2/health/ready", adapt(v2.Ready))
	r.Head("/v2/health/ready", adapt(v2.Ready))
	r.Post("/v1/ui/session", adapt(a.HandleSignIn))
	r.Delete("/v1/ui/session", adapt(a.HandleSignOut))

	// The dashboard's reads: the API key or a dashboard session.
	r.Group(func(r chi.Router) {
		r.Use(a.DashboardRead())
		r.Get("/v1/models", adapt(s.handleListModels))
		r.Get("/v1/events", adapt(s.events.Handle)) // a stream: no timeout middleware here either
		r.Get("/v1/catalogue", adapt(s.handleCatalogue))
		r.Get("/v1/ui/config", adapt(s.handleUIConfig))
		r.Post("/v2/repository/index", adapt(v2.Index)) // GET /v1/models's snapshot
	})

	// The rest of the API: the API key as a Bearer token only.
	r.Group(func(r chi.Router) {
		r.Use(a.APIRead())
		r.Get("/metrics", s.met.Handler().ServeHTTP)
		r.Get("/v1/models/{id}", adapt(s.handleGetModel))
		r.Post("/v1/models/{id}/infer", adapt(s.handleInfer))
		// The OpenAI routes (internal/openai).
		r.Post("/v1/audio/speech", adapt(oa.Speech))
		r.Post("/v1/audio/transcriptions", adapt(oa.Transcription))
		r.Post("/v1/audio/voice-activity", adapt(oa.VoiceActivity))
		r.Post("/v1/audio/diarization", adapt(oa.Diarization))
		r.Post("/v1/audio/speech/embedding", adapt(oa.SpeakerEmbedding)) // speaches' route
		r.Get("/v1/audio/voices", adapt(oa.Voices))
		r.Post("/v1/audio/translations", adapt(oa.Translation))
		r.Get("/v1/realtime", adapt(s.realtimeHandler().Serve)) // a WebSocket: holds its lease for the session
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
		r.Use(a.DashboardManage())
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
		r.Use(a.APIManage())
		r.Post("/v1/models/unload", adapt(s.handleBulkUnload))
		r.Delete("/v1/models/{id}", adapt(s.handleDelete))
		if s.fx != nil {
			r.Get("/v1/fixture/gates", adapt(s.handleListGates))
			r.Post("/v1/fixture/gates/{name}/open", adapt(s.handleOpenGate))
		}
	})
	return r
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
		StartupFailure: s.startupFailure,
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
