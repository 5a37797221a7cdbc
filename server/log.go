package server

import (
	"context"
	"log/slog"
)

// requestInfo is what the requestID middleware puts in a request's
// context: the request ID and the server's logger. The request-scoped
// logger is built from them only when something is logged, so a request
// that logs nothing pays for no logger.
type requestInfo struct {
	id   string
	base *slog.Logger
}

type requestInfoKey struct{}

// logger returns the request-scoped logger (carrying request_id), or slog's
// default outside a request.
func logger(ctx context.Context) *slog.Logger {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return ri.base.With(slog.String("request_id", ri.id))
	}
	return slog.Default()
}

// requestIDFrom returns the request ID the requestID middleware gave the
// request, or "".
func requestIDFrom(ctx context.Context) string {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return ri.id
	}
	return ""
}
