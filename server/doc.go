// Package server is Sluice's HTTP API on chi: status, inference, management
// and fixture-control endpoints, with one error type mapped to HTTP in one
// place, strict JSON decoding, body limits, API keys, request-scoped slog
// loggers, Prometheus metrics and a graceful shutdown that cancels stalled
// socket I/O.
//
// Handlers translate HTTP to runtime calls and back; they hold no scheduling
// logic. Every handler returns an error through an adapter (adapt), so no
// handler can write an error and carry on; runtime errors become API errors
// through runtime.CodeOf and FromCode only.
//
// Files: server.go (Server, New, Options), routes.go (the router),
// h_*.go (one handler per endpoint), model.go (answer bodies),
// spec.go and decode.go (request bodies), checkpoint.go (models-root
// confinement), mw_*.go (middleware), wire_edge.go (the edge and the
// keys, from internal/edge and internal/auth), shutdown.go (Serve, Run,
// Shutdown and its slices), obs.go (what the metrics and the event stream
// read of this package), config.go (flags and the models file). The
// dashboard (CONTRACT.md ui.*): catalogue.go and h_catalogue.go (the models
// root and its catalogue, swapped together), h_spec.go (a model's
// committed spec), ui.go and ui/ (the embedded page).
//
// Observability lives under internal/: internal/follow is the one runtime
// follower (one subscription, one goroutine) whose steps feed both
// internal/metrics (Prometheus: the registry, the load and unload
// histograms, the request middleware) and internal/events (the hub behind
// GET /v1/events: it translates the runtime's steps and status snapshots,
// never a state of its own, keeps a ring for Last-Event-ID and fans out
// without blocking; and its handler). internal/sse is the one writer of
// text/event-stream answers (the event stream, the /infer and
// transcription streams).
//
// Protocol adapters live under internal/ and never import this package:
// internal/oip serves the Open Inference Protocol (/v2) through an
// oip.Host that routes.go wires (oipHandlers: the runtime, the edge's body
// decoding and task lease, the registry's managers) and writes its own
// error body (oip.Scope puts its writer in the request's context; the
// shared httpapi.WriteError asks the context, not the URL).
// internal/openai serves the OpenAI routes (/v1/audio/*) and holds their
// wire shapes, through an openai.Deps that wire_openai.go wires (the
// runtime, the task lease of task.go, the edge's body reading and
// spooling, the event stream). internal/httpapi holds
// the error type they share (Error is an alias of httpapi.Error);
// internal/registry is the persistent registry's service. internal/edge
// is the serving edge (connections and their limit, body limits and upload
// spooling, Host and Origin checks), internal/auth the keys and dashboard
// sessions; both write their refusals through the httpapi.WriteError they are
// handed.
//
// Threading rule: a Server is safe for concurrent use by net/http. Its own
// mutable state is the edge's connection tracker (one mutex for the set, one per
// connection ordering deadline changes between the shutdown loop and that
// connection's handler), the shutdown flag (atomic), the runtime follower,
// which runs on its own goroutine feeding the metrics and the event hub
// and is joined by Shutdown (the hub's ring and clients are behind its own
// mutex; it never waits for a client), and the models root with its catalogue
// (a read-write mutex, scans serialised outside it). Everything else is the
// runtime's, behind the runtime's lock.
package server
