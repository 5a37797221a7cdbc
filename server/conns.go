package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Stalled socket I/O at shutdown (CONTRACT.md time.shutdown-stalled-io).
//
// Every accepted connection is wrapped in a trackedConn that notes, once
// shutdown has begun, when its reads and writes last made progress. While
// the server shuts down, the slice loop (shutdown.go) visits every
// connection every tickEvery and gives it a deadline of stallSlice after its
// last progress:
//
//   - read deadlines only while the connection waits for a request header
//     or its handler still reads the request body. Once a handler has read
//     its body, net/http keeps a background read on the connection to see a
//     disconnect, and a failing read there cancels the request's context:
//     such connections never get a read deadline, and the body phase lifts
//     one that was set (trackedConn.bodyDone).
//   - write deadlines always: a write blocked for a whole slice without
//     progress fails, and the handler sees the error (a stream stops and
//     releases its lease).
//
// Large writes are cut into writePiece pieces so that a slow but reading
// client shows progress between them.
const (
	stallSlice = 250 * time.Millisecond
	tickEvery  = 50 * time.Millisecond
	writePiece = 64 << 10
)

// connTracker knows every open connection of one server.
type connTracker struct {
	stopping atomic.Bool
	start    atomic.Int64 // unix nanoseconds when shutdown began

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	empty chan struct{} // closed once stopping and no connection is left

	// watched turns on change notifications (tests): changed is closed and
	// replaced whenever a connection opens, closes or changes phase.
	watched atomic.Bool
	wmu     sync.Mutex
	changed chan struct{}
}

func newConnTracker() *connTracker {
	return &connTracker{conns: map[*trackedConn]struct{}{}, empty: make(chan struct{}), changed: make(chan struct{})}
}

// notify wakes awaitConns callers.
func (t *connTracker) notify() {
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
func (t *connTracker) awaitConns(ctx context.Context, cond func([]*trackedConn) bool) error {
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

// phase returns whether a handler runs on c and whether it still reads its
// body.
func (c *trackedConn) phase() (inHandler, readingBody bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inHandler, c.readingBody
}

// beginShutdown starts progress tracking; it returns a channel closed when
// the last connection has closed.
func (t *connTracker) beginShutdown(now time.Time) <-chan struct{} {
	t.start.Store(now.UnixNano())
	t.stopping.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeIfEmptyLocked()
	return t.empty
}

func (t *connTracker) closeIfEmptyLocked() {
	if len(t.conns) == 0 && t.stopping.Load() {
		select {
		case <-t.empty:
		default:
			close(t.empty)
		}
	}
}

// connState is the http.Server's ConnState hook.
func (t *connTracker) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	t.mu.Lock()
	switch st {
	case http.StateNew:
		t.conns[tc] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(t.conns, tc)
		t.closeIfEmptyLocked()
	}
	t.mu.Unlock()
	t.notify()
}

// count returns the number of open connections.
func (t *connTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// snapshot returns the open connections.
func (t *connTracker) snapshot() []*trackedConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		out = append(out, c)
	}
	return out
}

// tick gives every connection its deadlines for this slice.
func (t *connTracker) tick(now time.Time) {
	start := t.start.Load()
	for _, c := range t.snapshot() {
		c.tick(now, start)
	}
}

// trackedListener wraps accepted connections in trackedConns.
type trackedListener struct {
	net.Listener
	t *connTracker
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c, t: l.t}, nil
}

// trackedConn is one accepted connection and what shutdown needs to know
// about it.
type trackedConn struct {
	net.Conn
	t *connTracker

	lastRead  atomic.Int64 // unix ns of the last read progress, noted once stopping
	lastWrite atomic.Int64 // unix ns of the last write progress or write start, noted once stopping
	writing   atomic.Bool  // a Write is in progress

	// mu orders deadline changes between the slice loop and the handler.
	mu           sync.Mutex
	inHandler    bool // a handler runs on the connection
	readingBody  bool // ...and has not finished reading its body
	readDeadline bool // the slice loop set a read deadline
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.t.stopping.Load() {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *trackedConn) Write(p []byte) (int, error) {
	c.writing.Store(true)
	if c.t.stopping.Load() {
		c.lastWrite.Store(time.Now().UnixNano())
	}
	n := 0
	for len(p) > 0 {
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

// CloseWrite half-closes a TCP connection, as net/http does before closing
// a connection it answered with an error.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// beginRequest marks a handler running; hasBody says whether it still has a
// body to read. Without one, net/http's background read already watches the
// connection, so a read deadline set while the header was awaited is lifted.
func (c *trackedConn) beginRequest(hasBody bool) {
	c.mu.Lock()
	c.inHandler, c.readingBody = true, hasBody
	if !hasBody {
		c.clearReadDeadlineLocked()
	}
	c.mu.Unlock()
	c.t.notify()
}

// bodyDone marks the end of the handler's body phase.
func (c *trackedConn) bodyDone() {
	c.mu.Lock()
	if c.readingBody {
		c.readingBody = false
		c.clearReadDeadlineLocked()
	}
	c.mu.Unlock()
	c.t.notify()
}

// endRequest marks the handler finished.
func (c *trackedConn) endRequest() {
	c.mu.Lock()
	c.inHandler, c.readingBody = false, false
	c.mu.Unlock()
	c.t.notify()
}

func (c *trackedConn) clearReadDeadlineLocked() {
	if c.readDeadline {
		c.readDeadline = false
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

// tick sets the connection's deadlines for one slice: stallSlice after the
// later of its last progress and the start of shutdown.
func (c *trackedConn) tick(now time.Time, start int64) {
	if c.writing.Load() {
		_ = c.Conn.SetWriteDeadline(time.Unix(0, max(c.lastWrite.Load(), start)).Add(stallSlice))
	} else {
		_ = c.Conn.SetWriteDeadline(now.Add(stallSlice))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inHandler && !c.readingBody {
		return
	}
	c.readDeadline = true
	_ = c.Conn.SetReadDeadline(time.Unix(0, max(c.lastRead.Load(), start)).Add(stallSlice))
}

type connKey struct{}

// connContext is the http.Server's ConnContext hook: it lets handlers find
// their connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// connFrom returns the tracked connection of a request, or nil (for example
// under httptest.NewRecorder).
func connFrom(ctx context.Context) *trackedConn {
	c, _ := ctx.Value(connKey{}).(*trackedConn)
	return c
}

// trackRequest is the middleware that tells the connection when its handler
// runs and whether it still reads a body.
func trackRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := connFrom(r.Context())
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		c.beginRequest(r.Body != nil && r.Body != http.NoBody)
		defer c.endRequest()
		next.ServeHTTP(w, r)
	})
}
