package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Limits of the serving edge (CONTRACT.md "Connections and request bodies",
// matrix edge). Every request body is bounded in size (--max-body), in time
// (--body-read-timeout for the whole body, --min-body-rate after
// --body-rate-grace), and in the server-wide bytes that bodies in flight may
// hold (--body-budget in memory, --spool-budget on disk). Uploads over
// --spool-threshold are spooled to a temporary file and handed to engines as
// a backends.Blob; JSON bodies have their own small limit (--max-json-body).
const (
	// probeReserve is how many connections past --max-conns are accepted
	// when no open connection can be closed in their favour; they are
	// served only for /healthz and /readyz (edge.conn-limit).
	probeReserve = 8
	// fdHeadroom is what the automatic --max-conns leaves of RLIMIT_NOFILE
	// for files, the listener, the spool, the probe reserve and the engines.
	fdHeadroom   = 64
	minAutoConns = 16
	// RefuseDrain bounds how long net/http may read the rest of a body
	// that was refused unread (413, 503 body_budget) to keep the
	// connection.
	RefuseDrain = time.Second
	// MaxFormField bounds a multipart field other than the file.
	MaxFormField = 4 << 10
)

// bodyLimits is what the body middleware and the body readers share: the
// server's configuration and its two budgets.
type bodyLimits struct {
	readTimeout time.Duration // the whole body; 0: none
	minRate     int64         // bytes/s after grace; 0: none
	grace       time.Duration
	threshold   int64 // bodies over it are spooled
	maxJSON     int64
	spoolDir    string
	mem, disk   *budget
}

// budget is a server-wide count of bytes with a limit (0: unlimited). A
// reservation that does not fit is refused at once, never waited for
// (edge.body-budget).
type budget struct {
	mu    sync.Mutex
	used  int64
	limit int64
	// changed, when set, is called after every change of used: the
	// connection tracker's notify, so that tests can await a reservation.
	changed func()
}

func (b *budget) take(n int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	if b.limit > 0 && b.used+n > b.limit {
		b.mu.Unlock()
		return false
	}
	b.used += n
	b.mu.Unlock()
	if b.changed != nil {
		b.changed()
	}
	return true
}

func (b *budget) give(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	if b.changed != nil {
		b.changed()
	}
}

// inUse returns the reserved bytes (metrics, tests).
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// errBodyTimeout marks a body that did not arrive in time (408).
var errBodyTimeout = errors.New("request body not received in time")

// errBodyBudget marks a body of unknown length that outgrew the budget.
var errBodyBudget = errors.New("request bodies in flight exceed the server's budget")

// Error is the server's one error type (httpapi.Error).
type Error = httpapi.Error

func bodyTimeout() *Error {
	return &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
		Message: "the request body was not received in time (--body-read-timeout, --min-body-rate)", Err: errBodyTimeout}
}

func bodyBusy() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_busy", Code: "body_budget",
		Message: "too many request bytes in flight; retry later", Err: errBodyBudget}
}

// TooLarge is the 413 of a body over limit bytes.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "body_too_large",
		Message: fmt.Sprintf("request body over %d bytes", limit)}
}

// BodyError maps an error of reading a request body to its answer: 413 over
// the size limit, 408 too slow, 503 over the budget, an *Error as it is,
// else 400 naming what was read.
func BodyError(what string, err error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return TooLarge(tooBig.Limit)
	case errors.Is(err, errBodyTimeout):
		return bodyTimeout()
	case errors.Is(err, errBodyBudget):
		return bodyBusy()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return httpapi.Invalid("%s: %v", what, err)
}

// bodyReader is a request body under the read deadlines: before each read
// the connection's read deadline is set to the earlier of the whole-body
// deadline and the rate deadline (start + grace + received/minRate), so it
// moves out as bytes arrive (edge.body-timeout, edge.body-min-rate). At the
// end of the body (EOF or an error other than a timeout) the deadline is
// lifted at once: net/http's background read, which starts at EOF, must
// not inherit it (conn.go). After a timeout the expired deadline stays
// and the answer closes the connection.
type bodyReader struct {
	body  io.ReadCloser
	w     http.ResponseWriter
	rc    http.ResponseController // a value: one allocation less per request
	conn  *Conn                   // the tracked connection, when known: its deadlines without rc's search
	lim   *bodyLimits
	start time.Time
	n     int64

	// Reservations against the budgets: the declared length up front, or,
	// for a body of unknown length, what was read so far.
	declared      bool
	memHeld, disk int64

	err     error // sticky
	cleared bool
	ended   bool // a read returned an error (io.EOF included)
}

func (b *bodyReader) deadline() time.Time {
	var d time.Time
	if b.lim.readTimeout > 0 {
		d = b.start.Add(b.lim.readTimeout)
	}
	if b.lim.minRate > 0 {
		rd := b.start.Add(b.lim.grace + time.Duration(float64(b.n)/float64(b.lim.minRate)*float64(time.Second)))
		if d.IsZero() || rd.Before(d) {
			d = rd
		}
	}
	return d
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if d := b.deadline(); !d.IsZero() {
		if !time.Now().Before(d) {
			return 0, b.fail(errBodyTimeout)
		}
		b.armReadDeadline(d)
		b.cleared = false
	}
	n, err := b.body.Read(p)
	b.n += int64(n)
	if err != nil {
		b.ended = true
	}
	if !b.declared && n > 0 && !b.account(int64(n)) {
		return n, b.fail(errBodyBudget)
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, b.fail(fmt.Errorf("%w: %d bytes after %v", errBodyTimeout, b.n, time.Since(b.start).Round(time.Millisecond)))
		}
		b.lift()
	}
	return n, err
}

// account reserves n more bytes of a body of unknown length: its first
// threshold bytes against the memory budget, the rest against the spool's.
func (b *bodyReader) account(n int64) bool {
	m := min(n, max(0, b.lim.threshold-b.memHeld))
	if !b.lim.mem.take(m) {
		return false
	}
	b.memHeld += m
	if !b.lim.disk.take(n - m) {
		return false
	}
	b.disk += n - m
	return true
}

// fail makes err sticky and the answer close the connection: the rest of
// the body is never read, and the expired read deadline makes net/http's
// attempt to read it fail at once.
func (b *bodyReader) fail(err error) error {
	b.err, b.ended = err, true
	b.w.Header().Set("Connection", "close")
	_ = b.setReadDeadline(time.Now())
	return err
}

// bodyFailed reports whether err is a body reader's own failure (the
// connection keeps its expired read deadline and closes).
func bodyFailed(err error) bool {
	return errors.Is(err, errBodyTimeout) || errors.Is(err, errBodyBudget)
}

// finish runs when the handler returns: the reservations are given back,
// and a body the handler did not read to its end stays under its
// deadlines while net/http reads what is left of it (at most 256 KiB) to
// reuse the connection.
func (b *bodyReader) finish() {
	b.release()
	if !b.ended {
		if d := b.deadline(); !d.IsZero() {
			_ = b.setReadDeadline(d)
		}
	}
}

// lift clears the read deadline this reader set.
func (b *bodyReader) lift() {
	if !b.cleared {
		b.cleared = true
		_ = b.setReadDeadline(time.Time{})
	}
}

func (b *bodyReader) Close() error { return b.body.Close() }

// armReadDeadline sets the body's read deadline for the reads to come: on
// the tracked connection, given to the socket only when a read reaches it
// (Conn.armReadDeadline), else through rc at once.
func (b *bodyReader) armReadDeadline(d time.Time) {
	if b.conn != nil {
		b.conn.armReadDeadline(d)
		return
	}
	_ = b.rc.SetReadDeadline(d)
}

// setReadDeadline sets the connection's read deadline: on the tracked
// connection itself when the request came on one (what net/http's
// ResponseController reaches through the response writers, without
// searching them for the method), else through rc.
func (b *bodyReader) setReadDeadline(d time.Time) error {
	if b.conn != nil {
		return b.conn.SetReadDeadline(d)
	}
	return b.rc.SetReadDeadline(d)
}

// release gives the reservations back (the request ended).
func (b *bodyReader) release() {
	b.lim.mem.give(b.memHeld)
	b.lim.disk.give(b.disk)
	b.memHeld, b.disk = 0, 0
}

type limitsKey struct{}

// Body is what a handler that reads a request body needs of the edge:
// the limits that apply to it, and End, which ends the connection's body
// phase.
type Body struct {
	// MaxJSON bounds a JSON body (--max-json-body, edge.json-limit).
	MaxJSON int64
	// SpoolThreshold and SpoolDir: an upload longer than the threshold
	// is spooled to a file in the folder (edge.upload-spool, Spool).
	SpoolThreshold int64
	SpoolDir       string

	conn *Conn
}

// defaultBody is the Body of a request that did not pass LimitBody (as
// under some tests): 1 MiB limits, and no connection to tell.
var defaultBody = Body{MaxJSON: 1 << 20, SpoolThreshold: 1 << 20}

// BodyOf returns the body terms of a request (its context), or the
// defaults for one that did not pass LimitBody.
func BodyOf(ctx context.Context) Body {
	b := defaultBody
	var l *bodyLimits
	if loc := httpapi.Locals(ctx); loc != nil {
		l, _ = loc[httpapi.SlotBody].(*bodyLimits)
		if l != nil { // LimitBody kept the connection beside it
			b.conn, _ = loc[httpapi.SlotConn].(*Conn)
		}
	}
	if l == nil {
		l, _ = ctx.Value(limitsKey{}).(*bodyLimits)
		b.conn = connFrom(ctx)
	}
	if l != nil {
		b.MaxJSON, b.SpoolThreshold, b.SpoolDir = l.maxJSON, l.threshold, l.spoolDir
	}
	return b
}

// End tells the connection that the handler has read its body, err being
// the error of that reading (nil included): every read deadline is lifted
// (the shutdown slice's and the body reader's, CONTRACT.md
// time.shutdown-stalled-io, edge.body-timeout) before net/http's
// background read starts watching for a disconnect, since a read deadline
// left on a connection whose body was consumed would cancel the request's
// context. A body that failed for its deadline or the budget keeps its
// expired deadline: its answer (408, 503) closes the connection.
func (b Body) End(err error) {
	if b.conn != nil && !bodyFailed(err) {
		b.conn.bodyDone()
	}
}

// ReadBody reads body to its end, bounded by limit (413 over it, refused
// before any read when declared, the Content-Length, is over it), and
// then calls end with the reading's error, so that the connection's body
// phase ends before the caller goes on (Body.End). Errors are the
// answers of BodyError.
func ReadBody(body io.Reader, declared, limit int64, end func(error)) ([]byte, error) {
	if declared > limit {
		return nil, TooLarge(limit)
	}
	b, err := readAtMost(body, declared, limit+1)
	if err == nil && int64(len(b)) > limit {
		err = &http.MaxBytesError{Limit: limit}
	}
	if end != nil {
		end(err)
	}
	if err != nil {
		return nil, BodyError("reading the request body", err)
	}
	return b, nil
}

// readAtMost reads body to its end (io.EOF, not an error) or until it has
// max bytes, as io.ReadAll(io.LimitReader(body, max)) does, into a buffer
// sized for the declared length (-1: unknown) and one byte more to see
// the end: one allocation for a body whose length was declared.
func readAtMost(body io.Reader, declared, max int64) ([]byte, error) {
	size := int64(512) // io.ReadAll's first buffer
	if declared >= 0 {
		size = declared + 1
	}
	b := make([]byte, 0, min(size, max))
	for int64(len(b)) < max {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as append does
		}
		end := int64(cap(b))
		if end > max {
			end = max
		}
		n, err := body.Read(b[len(b):end])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
	return b, nil
}

// LimitBody bounds every request body (CONTRACT.md edge.*): a declared
// Content-Length over --max-body is refused before any read (413), one
// that does not fit the body budgets is refused at once with 503
// server_busy and Retry-After (edge.body-budget: never waited for, the
// rest of the body is dropped within RefuseDrain or the connection
// closes); the body is then read through a bodyReader
// (read deadlines, edge.body-timeout and edge.body-min-rate) under
// http.MaxBytesReader. Reservations are given back when the handler
// returns.
//
// LimitBody is kept out of line: inlined into the wrapper of a method value
// (routes passes s.edge.LimitBody), its closure was compiled again there
// without inlining the calls it makes, and http.NewResponseController
// allocated on every request. The other middleware constructors say the same.
//
//go:noinline
func (e *Edge) LimitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hasBody := r.Body != nil && r.Body != http.NoBody
		rc := *http.NewResponseController(w)
		// refuse answers without reading the body. net/http then reads
		// and drops what is left of it when that is at most 256 KiB (else
		// it closes the connection gracefully): that read gets RefuseDrain
		// at most, and a client that sends nothing more loses the
		// connection.
		refuse := func(err *Error) {
			if hasBody {
				_ = rc.SetReadDeadline(time.Now().Add(RefuseDrain))
			}
			e.writeError(w, r, err)
		}
		if r.ContentLength > e.maxBody {
			refuse(TooLarge(e.maxBody))
			return
		}
		lim := e.limits
		loc := httpapi.Locals(r.Context())
		var conn *Conn
		if loc != nil {
			conn, _ = loc[httpapi.SlotConn].(*Conn) // Track's, when it ran
		}
		if conn == nil {
			conn = connFrom(r.Context())
		}
		if loc != nil { // the request's state, else a value of its own
			loc[httpapi.SlotBody], loc[httpapi.SlotConn] = lim, conn
		} else {
			r = r.WithContext(context.WithValue(r.Context(), limitsKey{}, lim))
		}
		if !hasBody {
			next.ServeHTTP(w, r)
			return
		}
		br := &bodyReader{body: r.Body, w: w, rc: rc, conn: conn, lim: lim, start: time.Now()}
		if n := r.ContentLength; n >= 0 {
			br.declared = true
			m := min(n, lim.threshold)
			if !lim.mem.take(m) {
				refuse(bodyBusy())
				return
			}
			br.memHeld = m
			if !lim.disk.take(n - m) {
				br.release()
				refuse(bodyBusy())
				return
			}
			br.disk = n - m
		}
		defer br.finish()
		r.Body = http.MaxBytesReader(w, br, e.maxBody)
		next.ServeHTTP(w, r)
	})
}

// autoMaxConns is the default connection limit for a soft RLIMIT_NOFILE of
// nofile (0: unknown): the limit less fdHeadroom, at least minAutoConns.
func autoMaxConns(nofile uint64) int {
	if nofile == 0 {
		return 1024 - fdHeadroom
	}
	return int(max(int64(min(nofile, 1<<30))-fdHeadroom, minAutoConns))
}
