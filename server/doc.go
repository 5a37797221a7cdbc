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
// Shutdown and its slices), metrics.go and
// metrics_feed.go (Prometheus), config.go (flags and the models file).
// The dashboard (CONTRACT.md ui.*): events.go and events_translate.go (the event
// hub behind GET /v1/events: one runtime observer whose steps it translates
// (the runtime's status snapshots, never a state of its own), a ring for
// Last-Event-ID, non-blocking fan-out), h_events.go (the SSE
// stream), catalogue.go and h_catalogue.go (the models root and its
// catalogue, swapped together), h_spec.go (a model's committed spec),
// ui.go and ui/ (the embedded page).
//
// Protocol adapters live under internal/ and never import this package:
// internal/oip serves the Open Inference Protocol (/v2) through an
// oip.Host that routes.go wires (oipHandlers: the runtime, the edge's body
// decoding and task lease, the registry's managers) and writes its own
// error body (oip.Scope puts its writer in the request's context; the
// shared writeError asks the context, not the URL).
// internal/openai serves the OpenAI routes (/v1/audio/*) and holds their
// wire shapes, through an openai.Deps that wire_openai.go wires (the
// runtime, the task lease of task.go, the edge's body reading and
// spooling, the event stream). internal/httpapi holds
// the error type they share (Error is an alias of httpapi.Error);
// internal/registry is the persistent registry's service. internal/edge
// is the serving edge (connections and their limit, body limits and upload
// spooling, Host and Origin checks), internal/auth the keys and dashboard
// sessions; both write their refusals through the writeError they are
// handed.
//
// Threading rule: a Server is safe for concurrent use by net/http. Its own
// mutable state is the edge's connection tracker (one mutex for the set, one per
// connection ordering deadline changes between the shutdown loop and that
// connection's handler), the shutdown flag (atomic), the metrics feed and
// the event hub, which run on their own goroutines and are joined by
// Shutdown (the hub's ring, clients and mirror are behind its own mutex;
// it never waits for a client), and the models root with its catalogue
// (a read-write mutex, scans serialised outside it). Everything else is the
// runtime's, behind the runtime's lock.
package server
