// Package httpapi holds what the server's wiring and its protocol adapters
// (server/internal/oip, server/internal/openai, server/internal/realtime)
// share at the HTTP edge: the one error type handlers return and the one
// mapping of the scheduler's outcomes to it (FromCode, FromRuntime); the
// one error writer (WriteError, behind Adapt), which answers in the shape
// a protocol put in the request's context (WithShape), the edge's
// refusals included, and counts and samples refusals (Refusals); request
// IDs and request-scoped loggers (RequestIDs, Logger, RequestID); and the
// strict JSON decoder with the names a request may use (DecodeJSON,
// RequireJSON, ValidName, ValidModelID). It imports nothing of the server.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// Error is the one error type handlers return. Its Type and Status are the
// API's error shape, OpenAI's: {"error":{"message","type","param","code"}},
// with param and code JSON null where there is none (CONTRACT.md err.shape).
type Error struct {
	Status  int
	Type    string // invalid_request_error, permission_error, not_found_error, server_busy, shutting_down, internal_error
	Code    string // a finer machine-readable reason; "" is sent as null
	Param   string // the offending request field where known; "" is sent as null
	Message string
	Err     error // the cause, for logs; never sent to clients of 500s
	// RetryAfter, when positive, is the Retry-After of a server_busy
	// (rounded up to whole seconds, at least 1): the remaining load backoff
	// that core put in its Reject (CONTRACT.md fail.load-backoff).
	RetryAfter time.Duration
}

// Error returns the type, the message and the cause, for logs.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Type, e.Message, e.Err)
	}
	return e.Type + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeInvalid is the code of a 400 that has no finer one: the core's name
// of the outcome (core.CodeInvalid). Every 400 has a code (CONTRACT.md
// err.shape).
var CodeInvalid = core.CodeInvalid.String()

// Invalid returns a 400 invalid_request_error with code invalid_request.
func Invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// InvalidParam is Invalid naming the request field at fault (param).
func InvalidParam(param, format string, args ...any) *Error {
	e := Invalid(format, args...)
	e.Param = param
	return e
}

// Shape writes an error answer in a protocol's own body shape: e's status
// and headers are the writer's to set; msg is the message to send (the
// shared writer has already replaced a 500's empty message). Content-Type
// and Retry-After are set before it is called.
type Shape func(w http.ResponseWriter, e *Error, msg string)

type shapeKey struct{}

// WithShape returns ctx in which errors are written by shape.
func WithShape(ctx context.Context, shape Shape) context.Context {
	return context.WithValue(ctx, shapeKey{}, shape)
}

// ShapeFrom returns the shape ctx names, or nil for the API's own
// (OpenAI's) shape.
func ShapeFrom(ctx context.Context) Shape {
	s, _ := ctx.Value(shapeKey{}).(Shape)
	return s
}

// InvalidRequest is the 400 of a request the wire-shape parsers
// (server/internal/openai, backends/audio's engine requests) refused, naming the field they name (backends.ParamOf).
func InvalidRequest(err error) *Error {
	e := Invalid("%v", err)
	e.Param, e.Err = backends.ParamOf(err), err
	return e
}

// CodeModelNotFound is the code of an OpenAI route's 404 for a model
// name that names no model (neither an ID nor an alias), as OpenAI's own
// answer has it, with param "model".
const CodeModelNotFound = "model_not_found"

// ModelNotFound is e, when it is a 404 not_found_error, as an OpenAI
// route answers an unknown model: param "model", code model_not_found
// (CONTRACT.md err.not-found); any other e is returned as it is. e itself
// is never changed (a copy is returned).
func ModelNotFound(e *Error) *Error {
	if e == nil || e.Status != http.StatusNotFound || e.Type != "not_found_error" {
		return e
	}
	c := *e
	c.Param, c.Code = "model", CodeModelNotFound
	return &c
}

// FromRuntimeModel is FromRuntime as the OpenAI routes answer it: an
// unknown model is model_not_found with param "model" (ModelNotFound).
func FromRuntimeModel(err error) *Error { return ModelNotFound(FromRuntime(err)) }

// ModelNotFoundErr is ModelNotFound for an error that may be an *Error
// (nil stays nil; another error is returned as it is).
func ModelNotFoundErr(err error) error {
	var e *Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	if m := ModelNotFound(e); m != e {
		return m
	}
	return err
}
