package runtime

import (
	"time"

	"github.com/sluice-dev/sluice/core"
)

// The idle timer drives core.Tick for idle retirement (CONTRACT.md,
// "Eviction / idle retirement") and for the end of load backoffs
// (fail.load-backoff). It runs only when Options.Core.IdleTimeout or
// LoadBackoff is set. Admission deadlines are the waiters' own timers, which
// wake the waiters, and the runtime's deadline heap, which expires an
// overdue ticket before any event could grant it (deadlines.go). The timer is
// armed lazily: any event can make a model idle no earlier than now +
// IdleTimeout, so an event re-arms it only when it is unarmed or armed
// later than that; when it fires, core.NextDeadline says when to fire next.

// armTickLocked makes sure the idle timer fires no later than now+idle.
func (r *Runtime) armTickLocked(now int64) {
	if r.idle == 0 || r.m.ShuttingDown() { // no idle retirement while shutting down
		return
	}
	if want := now + r.idle; r.tickAt == 0 || r.tickAt > want {
		r.tickAt = want
		r.tickTimer.Reset(time.Duration(r.idle))
	}
}

// armBackoffLocked makes sure the timer fires when the machine's next
// deadline (a load backoff's end, CONTRACT.md fail.load-backoff) is due:
// core forgets a backoff only on the Tick at or after its end.
func (r *Runtime) armBackoffLocked(now int64) {
	if r.copts.LoadBackoff == 0 || r.tickAt < 0 || r.m.ShuttingDown() {
		return
	}
	if next := r.m.NextDeadline(); next > 0 && (r.tickAt == 0 || next < r.tickAt) {
		r.tickAt = next
		r.tickTimer.Reset(time.Duration(max(next-now, 1)))
	}
}

// tickLoop is the goroutine that owns the idle timer; Shutdown stops it.
func (r *Runtime) tickLoop() {
	defer close(r.tickDone)
	for {
		select {
		case <-r.tickTimer.C:
			r.tick()
		case <-r.tickStop:
			return
		}
	}
}

// tick applies core.Tick as one critical section and re-arms the timer for
// the machine's next deadline.
func (r *Runtime) tick() {
	now, xs := r.lockAt(r.clock()) // the runtime's deadlines first, as for every event (deadlines.go)
	ev := core.Event{Kind: core.EvTick, Now: now}
	r.m.Tick(ev.Now)
	r.tickAt = -1 // keep afterLocked from re-arming; set below
	var s sect
	r.afterLocked(now, &s, &ev, 0, nil)
	r.tickAt = 0
	if next := r.m.NextDeadline(); next > 0 {
		r.tickAt = next
		r.tickTimer.Reset(time.Duration(max(next-now, 1)))
	}
	r.mu.Unlock()
	r.execExpired(xs)
	r.exec(&s)
}
