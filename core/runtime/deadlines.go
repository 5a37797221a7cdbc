package runtime

import (
	"github.com/sluice-dev/sluice/core"
)

// Admission deadlines, kept by the runtime (CONTRACT.md
// time.admission-timeout, time.manager-timeout, time.timeout-precedence).
//
// The core expires a queued ticket only when the ticket's timeout event
// (Cancel with ReasonTimeout) reaches it, and each waiter's own timer sends
// that event. A timer is late when the machine stalls: its goroutine has
// not run yet when another event (a Release, a finished load) reaches the
// lock, and that event would grant the ticket past its deadline. So the
// runtime keeps the deadline of every queued ticket in a min-heap under
// its lock, and every critical section that feeds the core an event first
// feeds it the timeout of each ticket whose deadline is at or before the
// section's time, in deadline order (expireLocked). A timeout is an
// environment event the spec lets happen at any time to a queued ticket,
// so delivering it before the event that would grant the ticket is a legal
// interleaving, and the trace records it as the Cancel it is. The waiter's
// timer stays: it wakes the waiter, and its Cancel finds the ticket ended
// (ErrUnknownTicket), which await already reads as "the outcome is on its
// way".
//
// The heap is lazy: an entry stays when its ticket is granted or leaves
// otherwise, and is dropped when it comes due (the core says the ticket is
// no longer queued) or when the heap is compacted. Nothing but a push and
// an expiry touches it, so a grant costs nothing more; a push costs
// O(log n), and O(1) when deadlines come in order (one timeout for all); a
// section with no deadline due pays one comparison. A push that finds the
// heap at twice its size after the last compaction (at least minCompact)
// first compacts it to the entries of tickets still queued, so the heap
// never holds more than twice the tickets queued with a deadline at that
// compaction, or minCompact, at an amortised O(1) per push; an entry past
// its deadline leaves at the next event in any case.
//
// The heap is written here rather than on container/heap: heap.Push takes
// an any, which would box (allocate) every entry on the admission path,
// and the lazy compaction needs the slice itself.

// minCompact is the heap size below which it is never compacted.
const minCompact = 64

// deadline is one heap entry: ticket tk's admission deadline at (core time).
// seq breaks ties between equal deadlines in the order they were pushed
// (submission order), so the expiry order is deterministic.
type deadline struct {
	at  int64
	seq uint64
	tk  core.Ticket
}

// before orders the heap: earlier deadline first, then earlier push.
func (d *deadline) before(o *deadline) bool {
	return d.at < o.at || d.at == o.at && d.seq < o.seq
}

// deadlineHeap is a min-heap of deadlines (before), with lazy deletion.
type deadlineHeap struct {
	h       []deadline
	seq     uint64 // pushes, for the tie-break
	compact int    // the size at which push compacts next (0: minCompact)
}

// due reports whether the earliest deadline is at or before now.
func (q *deadlineHeap) due(now int64) bool { return len(q.h) > 0 && q.h[0].at <= now }

// full reports whether the heap has reached its compaction size: the next
// push should prune first.
func (q *deadlineHeap) full() bool { return len(q.h) >= max(q.compact, minCompact) }

// push adds ticket tk's deadline at.
func (q *deadlineHeap) push(tk core.Ticket, at int64) {
	q.seq++
	q.h = append(q.h, deadline{at: at, seq: q.seq, tk: tk})
	q.up(len(q.h) - 1)
}

// pop removes and returns the earliest deadline.
func (q *deadlineHeap) pop() deadline {
	d := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = deadline{}
	q.h = q.h[:last]
	q.down(0)
	return d
}

// prune keeps the entries live keeps, restores the heap order and sets the
// next compaction size to twice what is left.
func (q *deadlineHeap) prune(live func(deadline) bool) {
	n := 0
	for _, d := range q.h {
		if live(d) {
			q.h[n] = d
			n++
		}
	}
	clear(q.h[n:])
	q.h = q.h[:n]
	for i := n/2 - 1; i >= 0; i-- {
		q.down(i)
	}
	q.compact = 2 * n
}

func (q *deadlineHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.h[i].before(&q.h[p]) {
			return
		}
		q.h[p], q.h[i] = q.h[i], q.h[p]
		i = p
	}
}

func (q *deadlineHeap) down(i int) {
	n := len(q.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && q.h[c+1].before(&q.h[c]) {
			c++
		}
		if !q.h[c].before(&q.h[i]) {
			return
		}
		q.h[i], q.h[c] = q.h[c], q.h[i]
		i = c
	}
}

// queuedLocked reports whether d's ticket is still queued with that
// deadline: the entry is live. Tickets carry a generation, so an entry
// never matches a later ticket that reuses its index.
func (r *Runtime) queuedLocked(d deadline) bool { return r.m.Deadline(d.tk) == d.at }

// pushDeadlineLocked remembers the admission deadline at of queued ticket tk.
// It first compacts the heap when it is full (the method value allocates:
// only then).
func (r *Runtime) pushDeadlineLocked(tk core.Ticket, at int64) {
	if r.dl.full() {
		r.dl.prune(r.queuedLocked)
	}
	r.dl.push(tk, at)
}

// expireLocked feeds the core the timeout of every queued ticket whose
// admission deadline is at or before now, in deadline order, each as its
// own event stamped now (CONTRACT.md time.admission-timeout: a ticket
// past its deadline is never granted). It returns the section to execute
// after the lock is released, nil when nothing expired; its outcomes go to
// the tickets' waiters, never inline to a caller's own ticket.
func (r *Runtime) expireLocked(now int64) *sect {
	var s *sect
	for r.dl.due(now) {
		d := r.dl.pop()
		if !r.queuedLocked(d) { // granted, admitted or gone meanwhile: no longer timed
			continue
		}
		ev := core.Event{Kind: core.EvCancel, Now: now, Ticket: d.tk, Reason: core.ReasonTimeout}
		if _, err := r.m.Cancel(ev.Now, ev.Ticket, ev.Reason); err != nil {
			continue // unreachable: a queued ticket is known
		}
		if s == nil {
			s = new(sect)
		}
		r.afterLocked(now, s, &ev, 0, nil)
	}
	return s
}

// lockAt takes the runtime lock for an event read at clock time t: it
// stamps the event time and expires the overdue tickets before the caller
// feeds its own event. The caller executes the returned section (if not
// nil) after it unlocks, with execExpired. The hot paths (submission,
// release, cancel) spell it out, since the lock keeps it from inlining.
func (r *Runtime) lockAt(t int64) (int64, *sect) {
	r.mu.Lock()
	now := r.stampLocked(t)
	return now, r.expireDueLocked(now)
}

// expireDueLocked is expireLocked when a deadline is due, else nothing:
// small enough to inline into every event's section.
func (r *Runtime) expireDueLocked(now int64) *sect {
	if len(r.dl.h) == 0 || r.dl.h[0].at > now {
		return nil
	}
	return r.expireLocked(now)
}

// execExpired executes expireLocked's section after the lock is released.
func (r *Runtime) execExpired(s *sect) {
	if s != nil {
		r.exec(s)
	}
}
