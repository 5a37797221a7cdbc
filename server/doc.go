// Package server is Sluice's HTTP API on chi, as wiring: it builds the
// runtime, the persistent registry, the observers, the serving edge and the
// router from Config (New), serves and shuts down (Serve, Run, Shutdown),
// and holds the handlers of its own /v1 routes: status, inference,
// management, the catalogue, the fixture gates and the dashboard's config.
// Everything else lives under internal/, in packages that never import this
// one; only cmd/sluice, conformance/inproc and the benchmark harnesses
// import it (TestLayering; docs/design.md "The server's packages").
//
// Handlers translate HTTP to runtime calls and back; they hold no scheduling
// logic. Every handler returns an error through httpapi.Adapt, so no
// handler can write an error and carry on; runtime errors become API errors
// through httpapi.FromRuntime and FromCode only.
//
// Files: server.go (Server, New, Options), routes.go (the router and its
// middleware), h_*.go (one handler per endpoint), task.go (the task lease
// the adapters share), wire_edge.go, wire_openai.go and realtime.go (the
// edge, the keys and the adapters, wired), shutdown.go (Serve, Run,
// Shutdown and its slices), obs.go (what the metrics and the event stream
// read of this package), config.go (flags; the models file is
// internal/modelspec's), tls.go, trace.go and trace_options.go (the
// --trace file), ui.go and ui/ (the embedded dashboard, CONTRACT.md ui.*).
//
// Under internal/:
//
//   - httpapi: the one error type and its one mapping (FromCode,
//     FromRuntime), the one error writer (WriteError, Adapt) with refusal
//     counting and sampling, request IDs and request-scoped loggers with
//     the request's one state (RequestIDs, SetLocal), the strict JSON
//     decoder and the names a request may use.
//   - edge: connections and their limit, per-write deadlines, body limits,
//     upload spooling, Host and Origin checks, the JSON body decoder
//     (Decode); auth: the keys and dashboard sessions. Both write their
//     refusals through the writer they are handed.
//   - modelsroot: the models root and its catalogue, swapped together,
//     and a checkpoint's confinement inside the root; modelspec: a model
//     spec's JSON and the startup models file; wire: the /v1 model object
//     and the management and inference bodies; registry: the persistent
//     registry's management operations.
//   - openai (/v1/audio/*), oip (/v2, the Open Inference Protocol) and
//     realtime (/v1/realtime): protocol adapters, wired through their Deps
//     or Host (wire_openai.go, routes.go, realtime.go); a protocol's own
//     error body is put in the request's context (httpapi.WithShape), so
//     the one writer needs no URL.
//   - follow: the one runtime follower (one subscription, one goroutine)
//     whose steps feed metrics (Prometheus: the registry, the load and
//     unload histograms, the request middleware) and events (the hub
//     behind GET /v1/events: it translates the runtime's steps and status
//     snapshots, never a state of its own, keeps a ring for Last-Event-ID
//     and fans out without blocking); sse is the one writer of
//     text/event-stream answers.
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
