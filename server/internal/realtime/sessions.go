package realtime

import (
	"context"
	"sync"
)

// Sessions are the server's open live sessions: shutdown ends them
// (CONTRACT.md live.shutdown) and waits for their handlers, which the
// server's connection tracker no longer sees once the connection is
// hijacked.
type Sessions struct {
	stopping chan struct{}
	once     sync.Once

	mu      sync.Mutex
	closed  bool
	n       int
	pending int           // open sessions not admitted yet (live.late-admission)
	zero    chan struct{} // closed when closed and n is 0
	open    map[*liveSession]struct{}
}

// NewSessions returns an empty tracker, open to handshakes.
func NewSessions() *Sessions {
	return &Sessions{stopping: make(chan struct{}), zero: make(chan struct{}), open: map[*liveSession]struct{}{}}
}

// add counts a handshake in; false once shutdown began.
func (l *Sessions) add() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.n++
	return true
}

func (l *Sessions) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.closed && l.n == 0 {
		close(l.zero)
	}
}

func (l *Sessions) track(ls *liveSession, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.open[ls] = struct{}{}
	} else {
		delete(l.open, ls)
	}
}

// addPending counts an unadmitted session in; false when max are open.
func (l *Sessions) addPending(max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending >= max {
		return false
	}
	l.pending++
	return true
}

func (l *Sessions) donePending() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending--
}

// Count returns the open sessions.
func (l *Sessions) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// Shutdown tells every session to end (each commits its turn in progress
// and closes with 1001) and refuses new handshakes with 503
// shutting_down (live.shutdown).
func (l *Sessions) Shutdown() {
	l.once.Do(func() {
		close(l.stopping)
		l.mu.Lock()
		l.closed = true
		if l.n == 0 {
			close(l.zero)
		}
		l.mu.Unlock()
	})
}

// Wait waits, after Shutdown, for every session's handler; when ctx ends
// first, the sessions' sockets are closed at once and it waits for the
// handlers to see that.
func (l *Sessions) Wait(ctx context.Context) {
	select {
	case <-l.zero:
		return
	case <-ctx.Done():
	}
	l.mu.Lock()
	for ls := range l.open {
		ls.cut(context.Cause(ctx))
		_ = ls.c.CloseNow()
	}
	l.mu.Unlock()
	<-l.zero
}
