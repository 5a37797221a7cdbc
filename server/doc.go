// Package server is Sluice's HTTP API on chi: status, inference, management
// and fixture-control endpoints, with one error type mapped to HTTP in one
// place, strict JSON decoding, body limits, API keys, request-scoped slog
// loggers and Prometheus metrics.
//
// Handlers translate HTTP to runtime calls and back; they hold no scheduling
// logic. Every handler returns an error through an adapter, so no handler can
// write an error and carry on.
//
// Threading rule: a Server is safe for concurrent use by net/http; it keeps
// no mutable state of its own beyond what the runtime and the metrics guard.
package server
