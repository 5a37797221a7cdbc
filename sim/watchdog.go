package sim

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// stuck reports whether model h has work waiting at time now that nothing
// in flight can ever wake: tickets queued (and not timed out by now) or
// waiting for the pool, or a granted manager, while the model has no
// backend job, no request holds a lease on it, and it does not wait for
// residency that a running job will free. In a correct core that never
// holds (the machine is work-conserving); only a new event could move it.
func stuck(m *core.Machine, h core.Handle, now int64) (bool, core.ModelView) {
	v := m.Inspect(h)
	queued := 0
	for _, t := range v.Queue {
		if t.Deadline == 0 || t.Deadline > now {
			queued++
		}
	}
	if queued == 0 && v.WaitInit == 0 && v.Manager == nil {
		return false, v
	}
	if v.Active-v.WaitInit > 0 || v.JobKind != "none" {
		return false, v
	}
	if v.InLoaders && m.JobsInFlight() > 0 {
		return false, v
	}
	return true, v
}

// watchdog looks for stalls: a ticket that waited past the bound while
// its model cannot make progress. It also checks that no queued ticket is
// still waiting after its admission deadline and that core's deadlines are
// the contract's.
func (w *world) watchdog() {
	bound := w.opts.stallBound()
	for x := range w.m.Len() {
		h := core.Handle(x)
		md := w.o.model(h)
		if md.job != 0 {
			continue
		}
		s := w.m.Status(h)
		if s.QueuedRequests+s.QueuedManagers == 0 && s.ActiveSlots == 0 && md.waiting == 0 {
			continue
		}
		if w.overdue(h) {
			return
		}
		if md.running > 0 {
			continue
		}
		ok, v := stuck(w.m, h, w.now)
		if !ok {
			continue
		}
		oldest := w.now
		for _, t := range v.Queue {
			oldest = min(oldest, t.Since)
		}
		for _, t := range v.Slots {
			oldest = min(oldest, t.Since)
		}
		if v.Manager != nil {
			oldest = min(oldest, v.Manager.Since)
		}
		if w.now-oldest < bound {
			continue
		}
		w.failNow("stall", "%s: a ticket has waited %s and nothing in flight can wake it", v.ID, dur(w.now-oldest))
		w.fail.Chain = explain(w.m, &w.o, w.now, h)
		return
	}
}

// overdue checks model h's queue against the deadlines the contract gives:
// a queued request's deadline is the oracle's, and none is still queued
// once its deadline passed (a Tick was due at it). Reports a failure.
func (w *world) overdue(h core.Handle) bool {
	s := w.m.Status(h)
	if s.QueuedRequests+s.QueuedManagers == 0 {
		return false
	}
	v := w.m.Inspect(h)
	for _, t := range v.Queue {
		if t.Member {
			continue
		}
		i := uint32(t.Ticket)
		if int(i) < len(w.o.t) && w.o.t[i].id == t.Ticket && w.o.t[i].dead != t.Deadline {
			w.failNow("deadline", "%s: queued %s %s has deadline %s, the contract gives %s", v.ID, t.Kind, tname(t.Ticket),
				dur(t.Deadline), dur(w.o.t[i].dead))
			return true
		}
		if t.Deadline > 0 && t.Deadline < w.now {
			w.failNow("deadline", "%s: %s %s still queued %s after its deadline", v.ID, t.Kind, tname(t.Ticket), dur(w.now-t.Deadline))
			w.fail.Chain = explain(w.m, &w.o, w.now, h)
			return true
		}
	}
	return false
}

// finalChecks runs after the heap ran dry: every ticket ended, no job runs,
// and a shut-down machine said ShutdownComplete with nothing resident.
func (w *world) finalChecks() {
	if n := w.m.LiveTickets(); n > 0 || w.o.live > 0 {
		w.failNow("stall", "the run drained with %d live tickets (clients wait on %d)", n, w.o.live)
		for x := range w.m.Len() {
			if ok, _ := stuck(w.m, core.Handle(x), w.now); ok {
				w.fail.Chain = append(w.fail.Chain, explain(w.m, &w.o, w.now, core.Handle(x))...)
			}
		}
		return
	}
	if n := w.m.JobsInFlight(); n > 0 {
		w.failNow("drain", "the run drained with %d jobs in flight", n)
		return
	}
	if w.shutdownSent && !w.o.complete {
		n, mb := w.m.Residency()
		w.failNow("shutdown-complete", "shutdown drained without ShutdownComplete (%d models, %dMB resident)", n, mb)
	}
}

// explain describes what model h's waiting tickets wait on, link by link:
// the tickets ahead in its FIFO, the leases and the manager that hold it,
// its backend job, and the residency ledger and loads it waits for.
func explain(m *core.Machine, o *oracle, now int64, h core.Handle) []string {
	var out []string
	seen := map[core.Handle]bool{}
	var walk func(h core.Handle, depth int)
	walk = func(h core.Handle, depth int) {
		if seen[h] || depth > 4 {
			return
		}
		seen[h] = true
		v := m.Inspect(h)
		ind := strings.Repeat("  ", depth)
		out = append(out, fmt.Sprintf("%s%s: state=%s v%d slots=%d active=%d wait_init=%d job=%s in_loaders=%v resident=%v",
			ind, v.ID, v.State, v.Version, v.Config.Slots, v.Active, v.WaitInit, v.JobKind, v.InLoaders, v.Resident))
		for k, t := range v.Queue {
			what := t.Kind
			if t.Kind != "request" {
				what += " " + t.Op.String()
			}
			if t.Member {
				what += " (bulk member)"
			}
			dl := "no deadline"
			if t.Deadline > 0 {
				dl = "deadline " + dur(t.Deadline)
			}
			out = append(out, fmt.Sprintf("%s  queue[%d] %s %s, waiting %s, %s", ind, k, tname(t.Ticket), what, dur(now-t.Since), dl))
		}
		for _, t := range v.Slots {
			out = append(out, fmt.Sprintf("%s  slot %d %s %s since %s", ind, t.Slot, tname(t.Ticket), t.Phase, dur(t.Since)))
		}
		if v.Manager != nil {
			out = append(out, fmt.Sprintf("%s  manager %s %s at step %s since %s", ind, tname(v.Manager.Ticket), v.Manager.Op,
				v.ManagerStep, dur(v.Manager.Since)))
		}
		if int(h) < len(o.md) && o.md[h].job != 0 {
			md := &o.md[h]
			out = append(out, fmt.Sprintf("%s  engine job %d (%s) running since %s", ind, md.job, md.jkind, dur(md.jobAt)))
		}
		switch {
		case v.Active-v.WaitInit > 0:
			out = append(out, fmt.Sprintf("%s  <- waits for %d leases to be released", ind, v.Active-v.WaitInit))
		case v.JobKind != "none":
			out = append(out, fmt.Sprintf("%s  <- waits for its %s job", ind, v.JobKind))
		case v.InLoaders:
			n, mb := m.Residency()
			lim := m.Options()
			out = append(out, fmt.Sprintf("%s  <- waits in the loader queue %v: ledger %d models/%dMB, limits %d/%dMB, serial=%v, %d jobs in flight",
				ind, m.Loaders(), n, mb, lim.MaxLoadedModels, lim.MemoryBudgetMB, lim.SerializeColdLoads, m.JobsInFlight()))
			for _, x := range m.Loaders() {
				walk(x, depth+1)
			}
			for x := range m.Len() {
				if xv := m.Inspect(core.Handle(x)); xv.Resident && core.Handle(x) != h {
					walk(core.Handle(x), depth+1)
				}
			}
		default:
			out = append(out, ind+"  <- nothing in flight can wake it: no lease held, no backend job, no residency wait")
		}
	}
	walk(h, 0)
	return out
}
