package realtime

import (
	"context"
	"sync"

	"github.com/sluice-dev/sluice/core/runtime"
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
	// live counts, per model, the sessions holding one of its slots, and
	// leases the model each session lease was counted on (live.slot-share).
	live   map[string]int
	leases map[*runtime.Lease]string
}

// NewSessions returns an empty tracker, open to handshakes.
func NewSessions() *Sessions {
	return &Sessions{stopping: make(chan struct{}), zero: make(chan struct{}), open: map[*liveSession]struct{}{},
		live: map[string]int{}, leases: map[*runtime.Lease]string{}}
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

// ShareOf is how many of a model's slots live sessions may hold at once
// (CONTRACT.md live.slot-share): all but one when it has more than one,
// so requests always keep a slot; its one slot otherwise.
func ShareOf(slots int) int { return max(1, slots-1) }

// hold counts a granted session lease in on its model; false (nothing
// counted) when share sessions hold one of its slots already.
func (l *Sessions) hold(lease *runtime.Lease, share int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	model := lease.Model()
	if l.live[model] >= share {
		return false
	}
	l.live[model]++
	l.leases[lease] = model
	return true
}

// release gives back a session's lease and its reservation.
func (l *Sessions) release(lease *runtime.Lease, failed bool) {
	l.mu.Lock()
	if model, ok := l.leases[lease]; ok {
		delete(l.leases, lease)
		if l.live[model]--; l.live[model] <= 0 {
			delete(l.live, model)
		}
	}
	l.mu.Unlock()
	lease.Release(failed)
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
