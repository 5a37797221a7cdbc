package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/metrics"
)

// Error is the one error type handlers return (httpapi.Error, shared
// with the protocol adapters under server/internal).
type Error = httpapi.Error

// codeInvalid is the code of a 400 that has no finer one (httpapi.CodeInvalid).
var codeInvalid = httpapi.CodeInvalid

// Invalid returns a 400 invalid_request_error with code invalid_request.
func Invalid(format string, args ...any) *Error {
	return httpapi.Invalid(format, args...)
}

// InvalidParam is Invalid naming the request field at fault (param).
func InvalidParam(param, format string, args ...any) *Error {
	return httpapi.InvalidParam(param, format, args...)
}

// NotFound returns a 404 not_found_error.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: "not_found_error", Message: fmt.Sprintf(format, args...)}
}

// Forbidden returns a 403 permission_error.
func Forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Type: "permission_error", Message: fmt.Sprintf(format, args...)}
}

// Unauthorized returns a 401 for a missing or wrong key in OpenAI's shape:
// type invalid_request_error, code invalid_api_key (CONTRACT.md err.auth),
// which the OpenAI SDKs surface as their AuthenticationError. A 403 (a key
// that may not do this) stays permission_error.
func Unauthorized(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: fmt.Sprintf(format, args...)}
}

// FromCode maps a scheduler outcome to the API error (the one place where
// core codes become HTTP statuses).
func FromCode(c core.Code, msg string, cause error) *Error {
	e := &Error{Message: msg, Err: cause}
	switch c {
	case core.CodeServerBusy:
		e.Status, e.Type = http.StatusServiceUnavailable, "server_busy"
	case core.CodeShuttingDown:
		e.Status, e.Type = http.StatusServiceUnavailable, "shutting_down"
	case core.CodeInvalid:
		e.Status, e.Type = http.StatusBadRequest, "invalid_request_error"
	case core.CodeNotFound:
		e.Status, e.Type = http.StatusNotFound, "not_found_error"
	case core.CodeCancelled:
		// 499 in nginx's convention; nobody reads it.
		e.Status, e.Type = 499, "cancelled"
	default:
		e.Status, e.Type = http.StatusInternalServerError, "internal_error"
	}
	e.Code = c.String()
	if c == core.CodeInvalid {
		e.Param = backends.ParamOf(cause) // an engine naming the field at fault (file)
		if se := (*runtime.SpecError)(nil); e.Param == "" && errors.As(cause, &se) {
			e.Param = se.Field // the spec validator's field (slots, options, engine, ...)
		}
	}
	if re := (*runtime.Error)(nil); c == core.CodeServerBusy && errors.As(cause, &re) {
		e.RetryAfter = re.RetryAfter
	}
	return e
}

// retryAfter is the Retry-After header of a server_busy: the remaining
// backoff rounded up to whole seconds, at least retryAfterSeconds.
func retryAfter(e *Error) int {
	if e.RetryAfter <= 0 {
		return retryAfterSeconds
	}
	return max(int((e.RetryAfter+time.Second-1)/time.Second), retryAfterSeconds)
}

// retryAfterSeconds is the Retry-After a 503 server_busy carries.
const retryAfterSeconds = 1

// errorBody reads an error answer (a null param or code reads as "").
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   string `json:"param"`
		Code    string `json:"code"`
	} `json:"error"`
}

// errorWire is the wire shape of an error; nil Param and Code are JSON null.
type errorWire struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// wireOf is e's wire shape.
func wireOf(e *Error) errorWire {
	var b errorWire
	b.Error.Message, b.Error.Type = e.Message, e.Type
	b.Error.Param, b.Error.Code = nullable(e.Param), nullable(e.Code)
	return b
}

// nullable is s as a JSON string, or nil (null) when it is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writeError writes err in the API's error shape. Errors that are not an
// *Error become 500 internal_error without leaking their text.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "internal error", Err: err}
	}
	if refused(e) {
		if sink, ok := r.Context().Value(refusalSinkKey{}).(*refusalSink); ok {
			sink.record(r, e)
		}
	} else {
		logger(r.Context()).Error("request failed", slog.Int("status", e.Status), slog.String("type", e.Type), slog.Any("err", err))
	}
	body := wireOf(e)
	if e.Status == http.StatusBadRequest && e.Code == "" { // every 400 has a code (CONTRACT.md err.shape)
		body.Error.Code = &codeInvalid
	}
	if e.Status == http.StatusInternalServerError && e.Message == "" {
		body.Error.Message = "internal error"
	}
	if e.Type == "server_busy" {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(e)))
	}
	w.Header().Set("Content-Type", "application/json")
	if shape := httpapi.ShapeFrom(r.Context()); shape != nil { // a protocol's own body (CONTRACT.md oip.error-shape)
		shape(w, e, body.Error.Message)
		return
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// adapt turns a handlerFunc into an http.HandlerFunc: the error, if any, is
// written once, in the API's shape.
func adapt(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, r, err)
		}
	}
}

// writeJSON writes v with status 200.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return fmt.Errorf("server: encode response: %w", err)
	}
	return nil
}

// refused reports whether e is an expected refusal rather than a fault:
// every 4xx (and 499, a client that went away) and the 503s server_busy and
// shutting_down. Refusals are counted and logged sampled at INFO; the other
// 5xx are logged at ERROR, each (CONTRACT.md err.refusal-log).
func refused(e *Error) bool {
	return e.Status < 500 || e.Type == "server_busy" || e.Type == "shutting_down"
}

// Refusal log sampling: per error type, at most refusalBurst lines at once
// and refusalRate lines a second after that; each logged line carries how
// many lines of its type were suppressed since the previous one.
const (
	refusalRate  = 1.0
	refusalBurst = 5
)

// refusalSink counts refusals in the metrics and logs them sampled. The
// router's refusals middleware puts the server's sink in every request's
// context, where writeError finds it.
type refusalSink struct {
	met *metrics.Metrics
	now func() time.Time // time.Now; tests pin it

	mu      sync.Mutex
	buckets map[string]*refusalBucket // by error type: a fixed, small set
}

type refusalBucket struct {
	tokens     float64
	last       time.Time
	suppressed int64
}

type refusalSinkKey struct{}

func newRefusalSink(met *metrics.Metrics) *refusalSink {
	return &refusalSink{met: met, now: time.Now, buckets: map[string]*refusalBucket{}}
}

// middleware puts the sink in the request's context.
func (k *refusalSink) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), refusalSinkKey{}, k)))
	})
}

// record counts one refusal and logs it if its type's bucket allows.
func (k *refusalSink) record(r *http.Request, e *Error) {
	k.met.Refusal(e.Type, e.Code)
	ok, suppressed := k.allow(e.Type)
	if !ok {
		return
	}
	logger(r.Context()).Info("request refused", slog.Int("status", e.Status), slog.String("type", e.Type),
		slog.String("code", e.Code), slog.String("message", e.Message), slog.Int64("suppressed", suppressed))
}

// allow takes a token from typ's bucket; it returns whether a line may be
// logged and how many were suppressed before it.
func (k *refusalSink) allow(typ string) (bool, int64) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.buckets[typ]
	if !ok {
		b = &refusalBucket{tokens: refusalBurst, last: now}
		k.buckets[typ] = b
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(refusalBurst, b.tokens+d.Seconds()*refusalRate)
	}
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return true, n
}
