package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// Error is the runtime's one domain error: a contract outcome code, a
// message for the client and the underlying cause. The server maps Code to
// an HTTP status and body in one place (CONTRACT.md error shapes).
type Error struct {
	Code core.Code
	Msg  string
	Err  error
	// RetryAfter is, for a server_busy refused while the model backs off
	// after a failed load, how long the backoff still runs (from core's
	// Reject effect; 0 otherwise).
	RetryAfter time.Duration
	// Committed is, for a manager refused after it committed a config
	// version (a registration whose first load failed, a reconfigure whose
	// load failed after its commit), true: the change is live although the
	// answer is an error, and the persistent registry records it
	// (CONTRACT.md persist.committed-only). The core decides it
	// (core.Effect.Committed).
	Committed bool
}

// Committed reports whether err is a manager's refusal that came after the
// manager committed a config version (Error.Committed).
func Committed(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Committed
}

// Error returns the message, followed by the cause when there is one.
func (e *Error) Error() string {
	switch {
	case e.Msg != "" && e.Err != nil:
		return e.Msg + ": " + e.Err.Error()
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return e.Code.String() + ": " + e.Err.Error()
	}
	return e.Code.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's code (for example
// errors.Is(err, ErrServerBusy)). Sentinels are the Errors with only a Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Err == nil && t.Code == e.Code
}

// Sentinels for errors.Is, one per outcome code.
var (
	ErrServerBusy   = &Error{Code: core.CodeServerBusy}
	ErrShuttingDown = &Error{Code: core.CodeShuttingDown}
	ErrInvalid      = &Error{Code: core.CodeInvalid}
	ErrNotFound     = &Error{Code: core.CodeNotFound}
	ErrBackend      = &Error{Code: core.CodeBackend}
	ErrCancelled    = &Error{Code: core.CodeCancelled}
)

// CodeOf returns the outcome code of err: CodeOK for nil, the Code of an
// *Error in its chain, CodeInvalid for backends.ErrInvalid, CodeCancelled for
// context errors, and CodeBackend for anything else.
func CodeOf(err error) core.Code {
	if err == nil {
		return core.CodeOK
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, backends.ErrInvalid):
		return core.CodeInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return core.CodeCancelled
	}
	return core.CodeBackend
}

func invalidf(err error, format string, args ...any) *Error {
	return &Error{Code: core.CodeInvalid, Msg: fmt.Sprintf(format, args...), Err: err}
}

// refused is the caller's error for a Reject outcome: rejectError with a
// backoff's remaining time.
func refused(id string, o outcome) *Error {
	e := rejectError(id, o.code, o.cause)
	if o.retryAfter > 0 {
		e.RetryAfter = time.Duration(o.retryAfter)
		e.Msg = fmt.Sprintf("model %q: server busy: its last load failed; backing off for %v before the next load", id, e.RetryAfter.Round(time.Millisecond))
	}
	return e
}

// rejectError turns a Reject effect into the caller's error. id is empty
// for a bulk unload.
func rejectError(id string, code core.Code, cause error) *Error {
	subject := fmt.Sprintf("model %q", id)
	if id == "" {
		subject = "bulk unload"
	}
	var msg string
	switch code {
	case core.CodeServerBusy:
		msg = subject + ": server busy: not admitted within the admission timeout, the queue is full, every slot is overdue or no memory can be freed"
	case core.CodeShuttingDown:
		msg = "server is shutting down"
	case core.CodeInvalid:
		msg = subject + ": configuration not supported by the engine"
	case core.CodeNotFound:
		msg = subject + " not found"
	case core.CodeBackend:
		msg = subject + ": backend step failed"
	case core.CodeCancelled:
		msg = subject + ": cancelled"
	default:
		msg = subject + ": " + code.String()
	}
	return &Error{Code: code, Msg: msg, Err: cause}
}

func cancelled(ctx context.Context, id string) *Error {
	subject := fmt.Sprintf("model %q", id)
	if id == "" {
		subject = "bulk unload"
	}
	return &Error{Code: core.CodeCancelled, Msg: subject + ": caller went away", Err: context.Cause(ctx)}
}
