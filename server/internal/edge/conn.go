package edge

// One accepted connection (Conn): its read and write deadlines, composed
// from net/http's, the handler's, the write piece's and the shutdown
// slice loop's (the earliest wins), and the phases of its request. The
// tracker that holds every Conn, the listener and the connection limit
// are in conns.go.

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

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
