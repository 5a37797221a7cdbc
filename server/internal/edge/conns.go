package edge

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stalled socket I/O at shutdown (CONTRACT.md time.shutdown-stalled-io).
//
// Every accepted connection is wrapped in a Conn that notes, once
// shutdown has begun, when its reads and writes last made progress. While
// the server shuts down, the server's slice loop (its Shutdown, through
// Edge.Tick) visits every connection every TickEvery and gives it
// a deadline of stallSlice after its last progress:
//
//   - read deadlines only while the connection waits for a request header
//     or its handler still reads the request body. Once a handler has read
//     its body, net/http keeps a background read on the connection to see a
//     disconnect, and a failing read there cancels the request's context:
//     such connections never get a read deadline, and the body phase lifts
//     one that was set (Conn.bodyDone).
//   - write deadlines always: a write blocked for a whole slice without
//     progress fails, and the handler sees the error (a stream stops and
//     releases its lease).
//
// Large writes are cut into writePiece pieces so that a slow but reading
// client shows progress between them.
//
// Outside shutdown (CONTRACT.md edge.write-timeout): every piece written to
// the socket, net/http's own writes included, gets a write deadline
// --write-timeout after it starts, so a client that accepts nothing for that
// long fails the handler's write and its lease is released. Deadlines that
// net/http or a handler set (SetReadDeadline, SetWriteDeadline, as
// http.ResponseController does) are recorded and composed with the slice
// loop's and the piece's: the earliest wins.
//
// The connection limit (edge.conn-limit): past --max-conns, accepting a
// connection closes the oldest one that has no handler (idle or still
// sending its header), else the oldest one still sending its body; when
// every connection is in a handler past its body, up to probeReserve more
// are accepted and served only for /healthz and /readyz
// (edge.conn-limit), and beyond those a connection gets a minimal 503
// and is closed.
const (
	stallSlice = 250 * time.Millisecond
	// TickEvery is how often the shutdown's slice loop calls Edge.Tick.
	TickEvery  = 50 * time.Millisecond
	writePiece = 64 << 10
	// maxWriteSlack bounds writeSlack.
	maxWriteSlack = 10 * time.Millisecond
)

// tracker knows every open connection of one server.
type tracker struct {
	stopping atomic.Bool
	start    atomic.Int64 // unix nanoseconds when shutdown began

	mu    sync.Mutex
	conns map[*Conn]struct{}
	empty chan struct{} // closed once stopping and no connection is left

	writeTimeout time.Duration // every socket write's deadline; 0: none
	maxConns     int           // open connections; <= 0: no limit
	open         atomic.Int64  // accepted and not yet closed
	evicted      atomic.Int64  // closed for the limit (tests, logs)
	refused      atomic.Int64  // answered a raw 503 at accept

	// watched turns on change notifications (tests): changed is closed and
	// replaced whenever a connection opens, closes or changes phase.
	watched atomic.Bool
	wmu     sync.Mutex
	changed chan struct{}
}

func newTracker() *tracker {
	return &tracker{conns: map[*Conn]struct{}{}, empty: make(chan struct{}), changed: make(chan struct{})}
}

// notify wakes awaitConns callers.
func (t *tracker) notify() {
	if !t.watched.Load() {
		return
	}
	t.wmu.Lock()
	close(t.changed)
	t.changed = make(chan struct{})
	t.wmu.Unlock()
}

// awaitConns blocks until cond holds for the open connections or ctx ends;
// tests use it to know that a client reached a phase without sleeping.
func (t *tracker) awaitConns(ctx context.Context, cond func([]*Conn) bool) error {
	t.watched.Store(true)
	for {
		t.wmu.Lock()
		ch := t.changed
		t.wmu.Unlock()
		if cond(t.snapshot()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Phase returns whether a handler runs on c and whether it still reads its
// body.
func (c *Conn) Phase() (inHandler, readingBody bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inHandler, c.readingBody
}

// ReadDeadlineHeld reports whether a read deadline is kept on c, set by
// net/http or a handler, or by the slice loop (diagnostics and tests: none
// may stay once the body was read).
func (c *Conn) ReadDeadlineHeld() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.appRead.IsZero() || c.readDeadline
}

// beginShutdown starts progress tracking; it returns a channel closed when
// the last connection has closed.
func (t *tracker) beginShutdown(now time.Time) <-chan struct{} {
	t.start.Store(now.UnixNano())
	t.stopping.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeIfEmptyLocked()
	return t.empty
}

func (t *tracker) closeIfEmptyLocked() {
	if len(t.conns) == 0 && t.stopping.Load() {
		select {
		case <-t.empty:
		default:
			close(t.empty)
		}
	}
}

// connState is the http.Server's ConnState hook.
func (t *tracker) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*Conn) // first: the interface assertion below costs a method-set search each time it fails
	if !ok {
		if u, isTLS := c.(interface{ NetConn() net.Conn }); isTLS {
			tc, ok = u.NetConn().(*Conn) // a TLS connection over a tracked one (--tls-cert)
		}
		if !ok {
			return
		}
	}
	switch st {
	case http.StateNew:
		t.mu.Lock()
		t.conns[tc] = struct{}{}
		t.mu.Unlock()
	case http.StateIdle:
		tc.finishing.Store(false)
	case http.StateClosed, http.StateHijacked:
		t.mu.Lock()
		delete(t.conns, tc)
		t.closeIfEmptyLocked()
		t.mu.Unlock()
	}
	t.notify()
}

// count returns the number of open connections.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// snapshot returns the open connections.
func (t *tracker) snapshot() []*Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Conn, 0, len(t.conns))
	for c := range t.conns {
		out = append(out, c)
	}
	return out
}

// tick gives every connection its deadlines for this slice.
func (t *tracker) tick(now time.Time) {
	start := t.start.Load()
	for _, c := range t.snapshot() {
		c.tick(now, start)
	}
}

// trackedListener wraps accepted connections in tracked connections.
type trackedListener struct {
	net.Listener
	t *tracker
}

func (l *trackedListener) Accept() (net.Conn, error) {
	t := l.t
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &Conn{Conn: c, t: t, opened: time.Now()}
		n := t.open.Add(1)
		if limit := int64(t.maxConns); limit > 0 && n > limit {
			switch v := t.victim(); {
			case v != nil:
				t.evicted.Add(1)
				_ = v.Close()
			case n <= limit+probeReserve:
				tc.reserve = true
			default:
				t.refused.Add(1)
				go refuseConn(tc)
				continue
			}
		}
		return tc, nil
	}
}

// victim returns the connection to close for a new one at the limit: the
// oldest without a handler (idle, or still sending its header), else the
// oldest whose handler still reads its body; nil when every connection is
// past its body. A connection whose answer net/http still flushes is never
// taken.
func (t *tracker) victim() *Conn {
	var best *Conn
	bestClass := 2
	for _, c := range t.snapshot() {
		if c.closed.Load() || c.finishing.Load() {
			continue
		}
		in, body := c.Phase()
		class := 2
		switch {
		case !in:
			class = 0
		case body:
			class = 1
		}
		if class < bestClass || class == bestClass && class < 2 && c.opened.Before(best.opened) {
			best, bestClass = c, class
		}
	}
	if bestClass == 2 {
		return nil
	}
	return best
}

// tooManyConnsBody is the answer to a request past the connection limit.
const tooManyConnsBody = `{"error":{"message":"too many open connections; retry later","type":"server_busy","code":"too_many_connections"}}` + "\n"

// busyAnswer is what a connection past the limit and its probe reserve gets
// before it is closed.
var busyAnswer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: " + strconv.Itoa(retryAfterSeconds) +
	"\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(tooManyConnsBody)) + "\r\n\r\n" + tooManyConnsBody

func refuseConn(c *Conn) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(c.Conn, busyAnswer)
	_ = c.Close()
}

// isProbe reports whether a request is a health probe (GET, or HEAD as
// load balancers send), the only requests a connection of the probe
// reserve serves.
func isProbe(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && probePath(r.URL.Path)
}

// Conn is one accepted connection and what shutdown and the connection
// limit need to know about it. The embedded net.Conn is the socket
// itself (tests shrink its buffers).
type Conn struct {
	net.Conn
	t *tracker

	lastRead  atomic.Int64 // unix ns of the last read progress, noted once stopping
	lastWrite atomic.Int64 // unix ns of the last write progress or write start, noted once stopping
	writing   atomic.Bool  // a Write is in progress

	opened    time.Time   // accepted at
	reserve   bool        // accepted past the limit: probes only
	closed    atomic.Bool // Close was called
	finishing atomic.Bool // the handler returned; net/http still finishes the answer

	// mu orders read-deadline changes between the slice loop, net/http and
	// the handler.
	mu           sync.Mutex
	inHandler    bool      // a handler runs on the connection
	readingBody  bool      // ...and has not finished reading its body
	readDeadline bool      // the slice loop set a read deadline (sliceRead)
	sliceRead    time.Time // the slice loop's read deadline
	appRead      time.Time // the read deadline net/http or the handler set
	// applied is the read deadline last given to the socket, valid when
	// haveApplied: giving it the same one again is skipped (net/http and
	// the body reader each lift the deadline at the end of a body, and the
	// poller's timer is not free to touch).
	applied     time.Time
	haveApplied bool
	// readPending: appRead was recorded by ArmReadDeadline and not yet
	// given to the socket; the next Read gives it before it reads.
	readPending atomic.Bool

	// wmu orders write-deadline changes the same way.
	wmu        sync.Mutex
	appWrite   time.Time // set by net/http or the handler
	pieceWrite time.Time // --write-timeout after the current piece began
	sliceWrite time.Time // the slice loop's
}

// earliest returns the earlier non-zero time of a and b, or zero (no
// deadline).
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// SetReadDeadline records the read deadline of net/http or the handler and
// applies the earlier of it and the slice loop's.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appRead = t
	return c.applyReadLocked()
}

// armReadDeadline records a read deadline like SetReadDeadline but gives
// it to the socket only when a Read comes (Conn.Read): a body that
// net/http already buffered with the header is read without touching the
// socket, and neither its deadline nor its lifting costs the poller's
// timer. Every read of the socket still runs under the deadline. Only for
// the reader that reads next, on its own goroutine (the body reader): a
// Read already blocked would not see it.
func (c *Conn) armReadDeadline(t time.Time) {
	c.mu.Lock()
	c.appRead = t
	c.readPending.Store(true)
	c.mu.Unlock()
}

func (c *Conn) applyReadLocked() error {
	c.readPending.Store(false)
	d := c.appRead
	if c.readDeadline {
		d = earliest(d, c.sliceRead)
	}
	if c.haveApplied && d == c.applied { // the very same value, monotonic reading included
		return nil
	}
	err := c.Conn.SetReadDeadline(d)
	c.applied, c.haveApplied = d, err == nil
	return err
}

// SetWriteDeadline records the write deadline of net/http or the handler
// and applies the earliest of it, the piece's and the slice loop's.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.appWrite = t
	return c.applyWriteLocked()
}

func (c *Conn) applyWriteLocked() error {
	return c.Conn.SetWriteDeadline(earliest(earliest(c.appWrite, c.pieceWrite), c.sliceWrite))
}

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// Close closes the connection once and counts it out of the limit.
func (c *Conn) Close() error {
	if !c.closed.Swap(true) {
		c.t.open.Add(-1)
	}
	return c.Conn.Close()
}

func (c *Conn) Read(p []byte) (int, error) {
	if c.t.stopping.Load() {
		// The slice's deadline counts from the last progress, computed now:
		// a tick the slice loop ran late (or not yet) must not fail a
		// client that kept sending.
		c.mu.Lock()
		if c.readDeadline {
			c.armReadSliceLocked(c.t.start.Load())
		}
		c.mu.Unlock()
	}
	if c.readPending.Load() {
		c.mu.Lock()
		if c.readPending.Load() {
			_ = c.applyReadLocked()
		}
		c.mu.Unlock()
	}
	n, err := c.Conn.Read(p)
	if n > 0 && c.t.stopping.Load() {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	c.writing.Store(true)
	if c.t.stopping.Load() {
		c.lastWrite.Store(time.Now().UnixNano())
	}
	n := 0
	for len(p) > 0 {
		wt, stopping := c.t.writeTimeout, c.t.stopping.Load()
		if wt > 0 || stopping {
			now := time.Now()
			c.wmu.Lock()
			prev := c.pieceWrite
			if wt > 0 {
				c.pieceWrite = now.Add(wt)
			}
			if stopping {
				// Each piece has one slice to make progress, from its
				// start: the slice loop keeps no deadline on a connection
				// that is not writing, so a handler that waited (for a
				// load, say) while the loop ran late is not failed by a
				// deadline set for nothing.
				c.sliceWrite = now.Add(stallSlice)
			}
			if stopping || c.pieceWrite.Sub(prev) >= writeSlack(wt) {
				_ = c.applyWriteLocked()
			} else {
				// The deadline armed for an earlier piece less than
				// writeSlack ago stays: earlier than this piece's own by
				// less than that, never later, and the poller's
				// timer is not touched again (an answer is written in
				// two pieces, all but its last byte and then that byte).
				c.pieceWrite = prev
			}
			c.wmu.Unlock()
		}
		k := min(len(p), writePiece)
		m, err := c.Conn.Write(p[:k])
		n += m
		if m > 0 && c.t.stopping.Load() {
			c.lastWrite.Store(time.Now().UnixNano())
		}
		if err != nil {
			c.writing.Store(false)
			return n, err
		}
		p = p[k:]
	}
	c.writing.Store(false)
	return n, nil
}

// writeSlack is how long after a write deadline was armed a piece keeps
// it rather than arming its own: about a thousandth of the timeout, at
// most maxWriteSlack, so a piece's deadline is never later than
// --write-timeout after its start and earlier by at most that much.
func writeSlack(wt time.Duration) time.Duration {
	return min(wt>>10, maxWriteSlack)
}

// CloseWrite half-closes a TCP connection, as net/http does before closing
// a connection it answered with an error.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// beginRequest marks a handler running; hasBody says whether it still has a
// body to read. Without one, net/http's background read already watches the
// connection, so a read deadline set while the header was awaited is lifted.
func (c *Conn) beginRequest(hasBody bool) {
	c.mu.Lock()
	c.inHandler, c.readingBody = true, hasBody
	if !hasBody {
		c.clearReadDeadlineLocked()
	}
	c.mu.Unlock()
	c.t.notify()
}

// bodyDone marks the end of the handler's body phase: no read deadline
// stays on the connection, neither the slice loop's nor the body reader's.
func (c *Conn) bodyDone() {
	c.mu.Lock()
	if c.readingBody {
		c.readingBody = false
		c.readDeadline = false
		c.appRead = time.Time{}
		_ = c.applyReadLocked()
	}
	c.mu.Unlock()
	c.t.notify()
}

// endRequest marks the handler finished; until the connection is idle
// again net/http still flushes the answer, and the limit does not close it.
func (c *Conn) endRequest() {
	c.finishing.Store(true)
	c.mu.Lock()
	c.inHandler, c.readingBody = false, false
	c.mu.Unlock()
	c.t.notify()
}

func (c *Conn) clearReadDeadlineLocked() {
	if c.readDeadline {
		c.readDeadline = false
		_ = c.applyReadLocked()
	}
}

// tick sets the connection's deadlines for one slice: stallSlice after the
// later of its last progress and the start of shutdown. A connection that
// is not writing gets no write deadline from the loop (each piece it
// writes sets its own, Conn.Write).
func (c *Conn) tick(_ time.Time, start int64) {
	c.wmu.Lock()
	if c.writing.Load() {
		c.sliceWrite = time.Unix(0, max(c.lastWrite.Load(), start)).Add(stallSlice)
	} else {
		c.sliceWrite = time.Time{}
	}
	_ = c.applyWriteLocked()
	c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inHandler && !c.readingBody {
		return
	}
	c.readDeadline = true
	c.armReadSliceLocked(start)
}

// armReadSliceLocked sets the slice's read deadline: stallSlice after the
// later of the last read progress and the start of shutdown.
func (c *Conn) armReadSliceLocked(start int64) {
	c.sliceRead = time.Unix(0, max(c.lastRead.Load(), start)).Add(stallSlice)
	_ = c.applyReadLocked()
}

type connKey struct{}

// ConnContext is the http.Server's ConnContext hook: it lets handlers find
// their connection.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// connFrom returns the tracked connection of a request, or nil (for example
// under httptest.NewRecorder).
func connFrom(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}

// Track is the middleware that tells the connection when its handler
// runs and whether it still reads a body; on a connection of the probe
// reserve it answers everything but a probe 503 (edge.conn-limit).
func Track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := connFrom(r.Context())
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		if c.reserve && !isProbe(r) { // edge.conn-limit: the probe reserve
			// Written here, not through writeError: a flood of these is
			// not worth an error log line each.
			h := w.Header()
			h.Set("Connection", "close")
			h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
			h["Content-Type"] = jsonContentType
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, tooManyConnsBody)
			return
		}
		c.beginRequest(r.Body != nil && r.Body != http.NoBody)
		defer c.endRequest()
		next.ServeHTTP(w, r)
	})
}
