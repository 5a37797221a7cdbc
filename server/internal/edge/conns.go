package edge

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
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
		httpapi.SetLocal(r.Context(), httpapi.SlotConn, c) // found once: LimitBody and the body reader read the slot
		next.ServeHTTP(w, r)
	})
}
