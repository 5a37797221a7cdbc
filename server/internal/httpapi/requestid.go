package httpapi

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
	"unsafe"
)

// RequestIDHeader carries the request ID in both directions.
const RequestIDHeader = "X-Request-Id"

// statusRecorder remembers the status a handler wrote, for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush,
// deadlines) through the recorder.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// requestState is everything the RequestIDs middleware keeps per request,
// in one allocation: with WithRequestState, the request's context node
// too.
type requestState struct {
	statusRecorder
	info  requestInfo
	ready bool // RequestIDs filled info: the context shows it from then on
	hdr   [1]string
	idbuf [16]byte
	ctx   stateCtx
}

// stateCtx is the context node WithRequestState makes: the request state
// (once RequestIDs has filled it) and one value more, the router's, so
// that the router and the middlewares below it copy the request no more.
type stateCtx struct {
	context.Context
	st       *requestState
	key, val any
}

type stateKey struct{}

func (c *stateCtx) Value(key any) any {
	switch key.(type) {
	case stateKey:
		return c.st
	case requestInfoKey:
		if c.st.ready {
			return &c.st.info
		}
		return c.Context.Value(key)
	}
	if key == c.key {
		return c.val
	}
	return c.Context.Value(key)
}

// WithRequestState returns parent with an empty request state, which
// RequestIDs then fills in place instead of copying the request, and with
// val under key in the same node (the router's route context, which the
// router then finds and does not add). Until RequestIDs has run, the
// context has no request ID (RequestID, Logger answer as parent's would);
// its slots (SetLocal) are there from the start.
func WithRequestState(parent context.Context, key, val any) context.Context {
	st := &requestState{}
	st.ctx = stateCtx{Context: parent, st: st, key: key, val: val}
	return &st.ctx
}

// RequestIDs gives every request an ID (the client's X-Request-Id when it
// is well-formed, else a random one), returns it in the response header,
// and puts it with the server's logger and refusals (the sink WriteError
// counts refusals in; nil: none) in the context (Logger(ctx) carries it,
// RequestID(ctx) returns it); it logs one line per request at debug
// level. That context value is the request's one state: the middlewares
// below keep their values in it (SetLocal), so the chain copies the
// request once, here, or not at all where WithRequestState made the state
// before the router.
//
// Kept out of line, as edge.LimitBody is, so that its closure is compiled
// with the calls in it inlined.
//
//go:noinline
func RequestIDs(base *slog.Logger, refusals *Refusals) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st, inPlace := r.Context().Value(stateKey{}).(*requestState)
			if !inPlace || st.ready {
				st, inPlace = &requestState{}, false
			}
			id := HeaderValue(r.Header, RequestIDHeader)
			if !ValidName(id, 64) { // a client's ID must be [A-Za-z0-9._-]{1,64}
				// Request IDs name requests in logs; they need to be unique,
				// not secret: the runtime's per-thread ChaCha8 source is
				// enough and costs nothing next to crypto/rand.
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], rand.Uint64())
				hex.Encode(st.idbuf[:], b[:])
				// The ID's bytes stay in the request state, written once
				// here and never again: the string shares them instead of
				// copying them into an allocation of their own.
				id = unsafe.String(&st.idbuf[0], len(st.idbuf))
			}
			st.hdr[0] = id
			w.Header()[RequestIDHeader] = st.hdr[:]
			// Field by field: the slots a middleware above set stay.
			st.info.id, st.info.base, st.info.refusals = id, base, refusals
			st.ready = true
			ctx := r.Context()
			if !inPlace {
				st.ctx = stateCtx{Context: ctx, st: st}
				ctx = &st.ctx
				r = r.WithContext(ctx)
			}
			// The status and byte counts are for the access log alone: a
			// request that logs no line writes through no recorder.
			if !base.Enabled(ctx, slog.LevelDebug) {
				next.ServeHTTP(w, r)
				return
			}
			st.ResponseWriter = w
			start := time.Now()
			next.ServeHTTP(&st.statusRecorder, r)
			Logger(ctx).Debug("request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", st.status), slog.Int64("bytes", st.bytes), slog.Duration("took", time.Since(start)))
		})
	}
}

// requestInfo is what the RequestIDs middleware puts in a request's
// context: the request ID and the server's logger. The request-scoped
// logger is built from them only when something is logged, so a request
// that logs nothing pays for no logger.
type requestInfo struct {
	id       string
	base     *slog.Logger
	refusals *Refusals
	local    [numSlots]any
}

// Slot names one per-request value of a middleware below RequestIDs
// (the edge's body limits, auth's credential), kept in the request's one
// state instead of a context value of its own: no context value and no
// copy of the request per middleware.
type Slot int

// The slots.
const (
	SlotBody Slot = iota
	SlotCredential
	SlotConn // the edge's tracked connection, found once per request
	numSlots
)

// SetLocal stores v in slot of the request state in ctx, before the
// handler runs (the middleware's own goroutine); it returns false when
// ctx has no request state (outside RequestIDs and WithRequestState),
// where the caller keeps its value in a context value of its own. Under
// WithRequestState the slots exist before RequestIDs has run, and what a
// middleware above it sets stays.
func SetLocal(ctx context.Context, slot Slot, v any) bool {
	st, ok := ctx.Value(stateKey{}).(*requestState)
	if ok {
		st.info.local[slot] = v
	}
	return ok
}

// Locals returns the request state's slots in ctx, or nil without one
// (SetLocal): one walk of the context for several slots.
func Locals(ctx context.Context) *[numSlots]any {
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		return &st.info.local
	}
	return nil
}

// Local returns slot's value in the request state in ctx, or nil.
func Local(ctx context.Context, slot Slot) any {
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		return st.info.local[slot]
	}
	return nil
}

type requestInfoKey struct{}

// Logger returns the request-scoped logger (carrying request_id), or
// slog's default outside a request.
func Logger(ctx context.Context) *slog.Logger {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return ri.base.With(slog.String("request_id", ri.id))
	}
	return slog.Default()
}

// RequestID returns the request ID the RequestIDs middleware gave the
// request, or "".
func RequestID(ctx context.Context) string {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return ri.id
	}
	return ""
}
