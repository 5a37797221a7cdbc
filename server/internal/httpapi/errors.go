package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// NotFound returns a 404 not_found_error.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: "not_found_error", Message: fmt.Sprintf(format, args...)}
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

// FromRuntime maps a runtime error to the API error through its core code
// (runtime.CodeOf, then FromCode: the one mapping).
func FromRuntime(err error) *Error {
	msg := err.Error()
	var e *runtime.Error
	if errors.As(err, &e) && e.Msg != "" {
		msg = e.Msg
	}
	c := runtime.CodeOf(err)
	if c == core.CodeInvalid {
		msg = err.Error() // the cause says what is invalid
	}
	return FromCode(c, msg, err)
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

// Wire is the wire shape of an error; nil Param and Code are JSON null.
type Wire struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// WireOf is e's wire shape.
func WireOf(e *Error) Wire {
	var b Wire
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

// WriteError is the one error writer: it writes err in the API's error
// shape, or in the shape the request's context names (WithShape). Errors
// that are not an *Error become 500 internal_error without leaking their
// text. Refusals go to the request's Refusals (counted, logged sampled);
// other failures are logged at ERROR, each.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "internal error", Err: err}
	}
	if refused(e) {
		if ri, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok && ri.refusals != nil {
			ri.refusals.record(r, e)
		}
	} else {
		Logger(r.Context()).Error("request failed", slog.Int("status", e.Status), slog.String("type", e.Type), slog.Any("err", err))
	}
	body := WireOf(e)
	if e.Status == http.StatusBadRequest && e.Code == "" { // every 400 has a code (CONTRACT.md err.shape)
		code := CodeInvalid
		body.Error.Code = &code
	}
	if e.Status == http.StatusInternalServerError && e.Message == "" {
		body.Error.Message = "internal error"
	}
	if e.Type == "server_busy" {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter(e)))
	}
	w.Header().Set("Content-Type", "application/json")
	if shape := ShapeFrom(r.Context()); shape != nil { // a protocol's own body (CONTRACT.md oip.error-shape)
		shape(w, e, body.Error.Message)
		return
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// HandlerFunc is a handler that returns its error instead of writing it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Adapt turns a HandlerFunc into an http.HandlerFunc: the error, if any,
// is written once, by WriteError, so no handler can write an error and
// carry on.
func Adapt(h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WriteError(w, r, err)
		}
	}
}

// WriteJSON writes v with status 200.
func WriteJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return fmt.Errorf("httpapi: encode response: %w", err)
	}
	return nil
}
