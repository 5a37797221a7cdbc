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
// Files: server.go (Server, New, Options), routes.go (the router and the
// body limit), h_*.go (one handler per endpoint), model.go (answer bodies),
// spec.go and decode.go (request bodies), checkpoint.go (models-root
// confinement), mw_*.go (middleware), conns.go and shutdown.go (connection
// tracking, Serve, Run, Shutdown and its slices), metrics.go and
// metrics_feed.go (Prometheus), config.go (flags and the models file).
//
// Threading rule: a Server is safe for concurrent use by net/http. Its own
// mutable state is the connection tracker (one mutex for the set, one per
// connection ordering deadline changes between the shutdown loop and that
// connection's handler), the shutdown flag (atomic) and the metrics feed,
// which runs on its own goroutine and is joined by Shutdown. Everything
// else is the runtime's, behind the runtime's lock.
package server
