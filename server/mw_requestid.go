package server

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
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

// requestState is everything the requestID middleware keeps per request,
// in one allocation.
type requestState struct {
	statusRecorder
	info  requestInfo
	hdr   [1]string
	idbuf [16]byte
}

// requestID gives every request an ID (the client's X-Request-Id when it is
// well-formed, else a random one), returns it in the response header, and
// puts it with the server's logger in the context (logger(ctx) carries it);
// it logs one line per request at debug level.
func requestID(base *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st := &requestState{}
			st.ResponseWriter = w
			id := r.Header.Get(RequestIDHeader)
			if !validName(id, 64) { // a client's ID must be [A-Za-z0-9._-]{1,64}
				// Request IDs name requests in logs; they need to be unique,
				// not secret: the runtime's per-thread ChaCha8 source is
				// enough and costs nothing next to crypto/rand.
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], rand.Uint64())
				hex.Encode(st.idbuf[:], b[:])
				id = string(st.idbuf[:])
			}
			st.hdr[0] = id
			w.Header()[RequestIDHeader] = st.hdr[:]
			st.info = requestInfo{id: id, base: base}
			ctx := context.WithValue(r.Context(), requestInfoKey{}, &st.info)
			debug := base.Enabled(ctx, slog.LevelDebug)
			var start time.Time
			if debug {
				start = time.Now()
			}
			next.ServeHTTP(&st.statusRecorder, r.WithContext(ctx))
			if debug {
				logger(ctx).Debug("request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
					slog.Int("status", st.status), slog.Int64("bytes", st.bytes), slog.Duration("took", time.Since(start)))
			}
		})
	}
}
