package server

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/oip"
)

// routes builds the router: one handler per endpoint, each returning its
// error through httpapi.Adapt.
//
// Middleware, outermost first: the request metrics (internal/metrics), the
// inference protocol's error scope (oip.Scope), the connection tracker (shutdown deadlines), the request ID and
// request-scoped logger with the refusal counter and sampled log (internal/httpapi), the Host allow-list and the cross-origin check
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
	r.Use(edge.Track, httpapi.RequestIDs(s.log, s.refuse), s.edge.CheckHost, s.edge.CheckOrigin,
		a.Authenticate, s.edge.LimitBody)
	// Unknown routes and methods need the API key too, so they say nothing
	// to a client without one.
	r.NotFound(a.DashboardRead()(httpapi.Adapt(func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.NotFound("no route for %s %s", r.Method, r.URL.Path)
	})).ServeHTTP)
	r.MethodNotAllowed(a.DashboardRead()(httpapi.Adapt(func(w http.ResponseWriter, r *http.Request) error {
		return &httpapi.Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + r.URL.Path}
	})).ServeHTTP)

	// Always open: probes, the dashboard's static shell (it holds no data;
	// CONTRACT.md ui.shell) and the sign-in itself.
	r.Get("/healthz", httpapi.Adapt(s.handleHealth)) // HEAD as GET too: load balancers probe with either
	r.Head("/healthz", httpapi.Adapt(s.handleHealth))
	r.Get("/readyz", httpapi.Adapt(s.handleReady))
	r.Head("/readyz", httpapi.Adapt(s.handleReady))
	ui := uiHandler()
	r.Get("/", ui.ServeHTTP)
	r.Get("/ui/*", ui.ServeHTTP)
	r.Get("/v2/health/live", httpapi.Adapt(v2.Live)) // the protocol's probes (CONTRACT.md oip.live, oip.ready), HEAD as GET
	r.Head("/v2/health/live", httpapi.Adapt(v2.Live))
	r.Get("/v2/health/ready", httpapi.Adapt(v2.Ready))
	r.Head("/v2/health/ready", httpapi.Adapt(v2.Ready))
	r.Post("/v1/ui/session", httpapi.Adapt(a.HandleSignIn))
	r.Delete("/v1/ui/session", httpapi.Adapt(a.HandleSignOut))

	// The dashboard's reads: the API key or a dashboard session.
	r.Group(func(r chi.Router) {
		r.Use(a.DashboardRead())
		r.Get("/v1/models", httpapi.Adapt(s.handleListModels))
		r.Get("/v1/events", httpapi.Adapt(s.events.Handle)) // a stream: no timeout middleware here either
		r.Get("/v1/catalogue", httpapi.Adapt(s.handleCatalogue))
		r.Get("/v1/ui/config", httpapi.Adapt(s.handleUIConfig))
		r.Post("/v2/repository/index", httpapi.Adapt(v2.Index)) // GET /v1/models's snapshot
	})

	// The rest of the API: the API key as a Bearer token only.
	r.Group(func(r chi.Router) {
		r.Use(a.APIRead())
		r.Get("/metrics", s.met.Handler().ServeHTTP)
		r.Get("/v1/models/{id}", httpapi.Adapt(s.handleGetModel))
		r.Post("/v1/models/{id}/infer", httpapi.Adapt(s.handleInfer))
		// The OpenAI routes (internal/openai).
		r.Post("/v1/audio/speech", httpapi.Adapt(oa.Speech))
		r.Post("/v1/audio/transcriptions", httpapi.Adapt(oa.Transcription))
		r.Post("/v1/audio/voice-activity", httpapi.Adapt(oa.VoiceActivity))
		r.Post("/v1/audio/diarization", httpapi.Adapt(oa.Diarization))
		r.Post("/v1/audio/speech/embedding", httpapi.Adapt(oa.SpeakerEmbedding)) // speaches' route
		r.Get("/v1/audio/voices", httpapi.Adapt(oa.Voices))
		r.Post("/v1/audio/translations", httpapi.Adapt(oa.Translation))
		r.Get("/v1/realtime", httpapi.Adapt(s.realtimeHandler().Serve)) // a WebSocket: holds its lease for the session
		// The inference protocol (internal/oip), as /v1/models/{id} and its infer.
		r.Get("/v2", httpapi.Adapt(v2.Server))
		r.Get("/v2/models/{id}", httpapi.Adapt(v2.Model))
		r.Get("/v2/models/{id}/ready", httpapi.Adapt(v2.ModelReady))
		r.Head("/v2/models/{id}/ready", httpapi.Adapt(v2.ModelReady))
		r.Post("/v2/models/{id}/infer", httpapi.Adapt(v2.Infer))
		// The advertised version, config_version; any other is 404 (oip.versions).
		r.Get("/v2/models/{id}/versions/{version}", httpapi.Adapt(v2.Model))
		r.Get("/v2/models/{id}/versions/{version}/ready", httpapi.Adapt(v2.ModelReady))
		r.Head("/v2/models/{id}/versions/{version}/ready", httpapi.Adapt(v2.ModelReady))
		r.Post("/v2/models/{id}/versions/{version}/infer", httpapi.Adapt(v2.Infer))
	})

	// Management the dashboard's buttons use: the management key or a
	// session made with it.
	r.Group(func(r chi.Router) {
		r.Use(a.DashboardManage())
		r.Put("/v1/models/{id}", httpapi.Adapt(s.handleApply))
		r.Post("/v1/models/{id}/load", httpapi.Adapt(s.handleLoad))
		r.Post("/v1/models/{id}/unload", httpapi.Adapt(s.handleUnload))
		r.Get("/v1/models/{id}/spec", httpapi.Adapt(s.handleGetSpec))
		r.Put("/v1/settings/models-root", httpapi.Adapt(s.handleSetModelsRoot))
		r.Post("/v2/repository/models/{id}/load", httpapi.Adapt(v2.Load)) // the same managers (internal/oip)
		r.Post("/v2/repository/models/{id}/unload", httpapi.Adapt(v2.Unload))
	})
	// Other management: the management key only.
	r.Group(func(r chi.Router) {
		r.Use(a.APIManage())
		r.Post("/v1/models/unload", httpapi.Adapt(s.handleBulkUnload))
		r.Delete("/v1/models/{id}", httpapi.Adapt(s.handleDelete))
		if s.fx != nil {
			r.Get("/v1/fixture/gates", httpapi.Adapt(s.handleListGates))
			r.Post("/v1/fixture/gates/{name}/open", httpapi.Adapt(s.handleOpenGate))
		}
	})
	return httpapi.Root(r)
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
		Lease:          s.taskLease,
		WriteTask:      writeTask,
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
