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
// The heap holds only tickets with a registered waiter (one that did not
// get its answer in its own submission) and a bounded deadline; an entry
// leaves when its waiter does (takeWaiterLocked) or when it expires.
// Pushing and removing cost O(log n) in the queued tickets; a section with
// no deadline due pays one comparison.

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

// dueLocked reports whether some queued ticket's deadline is at or before
// now: the one comparison an event pays when none is.
func (r *Runtime) dueLocked(now int64) bool { return len(r.dl) > 0 && r.dl[0].at <= now }

// expireLocked feeds the core the timeout of every queued ticket whose
// admission deadline is at or before now, in deadline order, each as its
// own event stamped now (CONTRACT.md time.admission-timeout: a ticket
// past its deadline is never granted). It returns the section to execute
// after the lock is released, nil when nothing expired; its outcomes go to
// the tickets' waiters, never inline to a caller's own ticket.
func (r *Runtime) expireLocked(now int64) *sect {
	var s *sect
	for r.dueLocked(now) {
		tk := r.dl[0].tk
		r.removeDeadlineLocked(0)
		if r.m.Deadline(tk) == 0 { // admitted meanwhile (waiting for its pool): no longer timed
			continue
		}
		ev := core.Event{Kind: core.EvCancel, Now: now, Ticket: tk, Reason: core.ReasonTimeout}
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
// nil) after it unlocks, with execExpired.
func (r *Runtime) lockAt(t int64) (int64, *sect) {
	r.mu.Lock()
	now := r.stampLocked(t)
	if !r.dueLocked(now) {
		return now, nil
	}
	return now, r.expireLocked(now)
}

// execExpired executes expireLocked's section after the lock is released.
func (r *Runtime) execExpired(s *sect) {
	if s != nil {
		r.exec(s)
	}
}

// pushDeadlineLocked puts ticket tk, whose waiter is registered, in the
// heap with deadline at.
func (r *Runtime) pushDeadlineLocked(tk core.Ticket, at int64) {
	r.dlSeq++
	r.dl = append(r.dl, deadline{at: at, seq: r.dlSeq, tk: tk})
	r.placeLocked(len(r.dl) - 1)
	r.upLocked(len(r.dl) - 1)
}

// removeDeadlineLocked takes the entry at heap index i out of the heap.
func (r *Runtime) removeDeadlineLocked(i int) {
	last := len(r.dl) - 1
	r.waiters[int(uint32(r.dl[i].tk))].hp = 0
	if i != last {
		r.dl[i] = r.dl[last]
		r.placeLocked(i)
	}
	r.dl[last] = deadline{}
	r.dl = r.dl[:last]
	if i != last {
		if !r.upLocked(i) {
			r.downLocked(i)
		}
	}
}

// placeLocked records that the entry at heap index i is there, in its
// ticket's waiter entry.
func (r *Runtime) placeLocked(i int) {
	r.waiters[int(uint32(r.dl[i].tk))].hp = int32(i + 1)
}

// upLocked moves the entry at i towards the root while it is earlier than
// its parent; it reports whether it moved.
func (r *Runtime) upLocked(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !r.dl[i].before(&r.dl[p]) {
			break
		}
		r.dl[p], r.dl[i] = r.dl[i], r.dl[p]
		r.placeLocked(p)
		r.placeLocked(i)
		i, moved = p, true
	}
	return moved
}

// downLocked moves the entry at i away from the root while a child is
// earlier.
func (r *Runtime) downLocked(i int) {
	n := len(r.dl)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && r.dl[c+1].before(&r.dl[c]) {
			c++
		}
		if !r.dl[c].before(&r.dl[i]) {
			return
		}
		r.dl[i], r.dl[c] = r.dl[c], r.dl[i]
		r.placeLocked(i)
		r.placeLocked(c)
		i = c
	}
}
