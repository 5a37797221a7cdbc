package sim

import (
	"errors"
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/core"
)

// replayStep is one event of a kept replay, with its effects described.
type replayStep struct {
	ev   core.Event
	tk   core.Ticket
	err  error
	effs []string
}

// replayer re-runs recorded core events on a fresh machine under the same
// oracle and invariants. Events of a subset refer to tickets and jobs by
// their recorded numbers, which change when earlier events are left out, so
// the replayer renames them: a ticket by the submission that created it, a
// job by its model's current job of the same kind. An event whose ticket or
// job does not exist in the subset is skipped.
type replayer struct {
	m     *core.Machine
	o     oracle
	tmap  map[core.Ticket]core.Ticket
	jmap  map[core.Job]core.Job
	keep  bool
	steps []replayStep
	trace *traceWriter
	fail  *Failure
	n     int
	noInv bool
}

func newReplayer(opts core.Options, keep bool, trace io.Writer) (*replayer, error) {
	m, err := core.New(opts)
	if err != nil {
		return nil, fmt.Errorf("sim: replay: %w", err)
	}
	r := &replayer{m: m, o: newOracle(m), tmap: map[core.Ticket]core.Ticket{}, jmap: map[core.Job]core.Job{}, keep: keep}
	if trace != nil {
		r.trace = newTraceWriter(trace)
	}
	return r, nil
}

// step replays one recorded event; it reports false once a check failed.
func (r *replayer) step(rec *recEv) bool {
	ev := rec.ev
	switch ev.Kind {
	case core.EvCancel, core.EvRelease:
		nt, ok := r.tmap[ev.Ticket]
		if !ok {
			return true
		}
		ev.Ticket = nt
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		if nj, ok := r.jmap[ev.Job]; ok {
			ev.Job = nj
			break
		}
		h, ok := r.m.Lookup(rec.jm)
		if !ok {
			return true
		}
		md := r.o.model(h)
		if md.job == 0 || md.jkind != jobEffect(ev.Kind) {
			return true
		}
		r.jmap[ev.Job] = md.job
		ev.Job = md.job
	}
	r.o.pre(&ev)
	tk, ok, err := apply(r.m, &ev)
	r.n++
	effs := r.m.Effects()
	r.o.post(&ev, tk, ok, err, effs)
	switch ev.Kind {
	case core.EvSubmitRequest, core.EvSubmitManager, core.EvSubmitBulkUnload:
		r.tmap[rec.tk] = tk
	}
	if r.o.fail == nil && !r.noInv {
		if ierr := r.m.CheckInvariants(); ierr != nil {
			var ie *core.InvariantError
			name := "?"
			if errors.As(ierr, &ie) {
				name = ie.Name
			}
			r.o.failf("invariant:"+name, ev.Now, "after %s: %v", ev.Kind, ierr)
		}
	}
	if r.trace != nil && err == nil {
		r.trace.event(r.m, &ev, tk, effs)
	}
	if r.keep {
		st := replayStep{ev: ev, tk: tk, err: err}
		for _, e := range effs {
			st.effs = append(st.effs, r.m.DescribeEffect(e))
		}
		r.steps = append(r.steps, st)
	}
	r.m.Advance()
	if r.o.fail != nil {
		r.fail = r.o.fail
		r.fail.Step = r.n
		return false
	}
	return true
}

// finish applies the end-of-run checks that a failure found outside an
// event needs: a stall (a model that nothing can wake), a deadline that
// passed by the time the watchdog looked (at), or a shutdown that drained
// without completing.
func (r *replayer) finish(want string, at int64) {
	if r.fail != nil {
		return
	}
	switch want {
	case "stall":
		for x := range r.m.Len() {
			if ok, v := stuck(r.m, core.Handle(x), at); ok {
				r.o.failf("stall", at, "%s: waiting work that nothing in flight can wake", v.ID)
				r.fail = r.o.fail
				r.fail.Chain = explain(r.m, &r.o, at, core.Handle(x))
				return
			}
		}
	case "deadline":
		for x := range r.m.Len() {
			v := r.m.Inspect(core.Handle(x))
			for _, t := range v.Queue {
				i := uint32(t.Ticket)
				if t.Member || int(i) >= len(r.o.t) || r.o.t[i].id != t.Ticket {
					continue
				}
				if r.o.t[i].dead != t.Deadline || (t.Deadline > 0 && t.Deadline < at) {
					r.o.failf("deadline", at, "%s: queued request %s deadline %s (contract %s)", v.ID, tname(t.Ticket),
						dur(t.Deadline), dur(r.o.t[i].dead))
					r.fail = r.o.fail
					return
				}
			}
		}
	case "shutdown-complete":
		if r.o.shutdown && !r.o.complete && r.m.LiveTickets() == 0 && r.m.JobsInFlight() == 0 {
			r.o.failf("shutdown-complete", at, "shutdown drained without ShutdownComplete")
			r.fail = r.o.fail
		}
	}
}

// replaySubset replays the recorded events at idx and reports the failure.
func replaySubset(opts core.Options, noInv bool, rec []recEv, idx []int, want string, at int64) *Failure {
	r, err := newReplayer(opts, false, nil)
	if err != nil {
		return nil
	}
	r.noInv = noInv
	for _, k := range idx {
		if !r.step(&rec[k]) {
			break
		}
	}
	r.finish(want, at)
	return r.fail
}

// describeEvent prints one event readably.
func describeEvent(ev *core.Event, tk core.Ticket) string {
	t := fmt.Sprintf("t=%-12s ", dur(ev.Now))
	switch ev.Kind {
	case core.EvSubmitRequest:
		return t + fmt.Sprintf("SubmitRequest %s timeout=%s -> %s", ev.Model, timeoutString(ev.Timeout), tname(tk))
	case core.EvSubmitManager:
		c := ""
		if ev.Config != nil {
			c = fmt.Sprintf(" {%s %s slots=%d mem=%d timeout=%s queue=%d}", ev.Config.Checkpoint, ev.Config.Options,
				ev.Config.Slots, ev.Config.MemoryMB, timeoutString(ev.Config.AdmissionTimeout), ev.Config.MaxQueue)
		}
		return t + fmt.Sprintf("SubmitManager %s %s%s timeout=%s -> %s", ev.Model, ev.Op, c, timeoutString(ev.Timeout), tname(tk))
	case core.EvSubmitBulkUnload:
		return t + fmt.Sprintf("SubmitBulkUnload %v -> %s", ev.Models, tname(tk))
	case core.EvCancel:
		return t + fmt.Sprintf("Cancel %s %s", tname(ev.Ticket), ev.Reason)
	case core.EvRelease:
		return t + fmt.Sprintf("Release %s failed=%v", tname(ev.Ticket), ev.Failed)
	case core.EvLoadDone, core.EvProbeDone:
		return t + fmt.Sprintf("%s job %d capacity=%d failed=%v", ev.Kind, uint32(ev.Job), ev.Capacity, ev.Failed)
	case core.EvCloneDone:
		return t + fmt.Sprintf("CloneDone job %d failed=%v", uint32(ev.Job), ev.Failed)
	case core.EvTeardownDone:
		return t + fmt.Sprintf("TeardownDone job %d", uint32(ev.Job))
	}
	return t + ev.Kind.String()
}

func tname(tk core.Ticket) string {
	if g := uint32(tk >> 32); g > 1 {
		return fmt.Sprintf("T%d.%d", uint32(tk), g)
	}
	return fmt.Sprintf("T%d", uint32(tk))
}

func timeoutString(t int64) string {
	switch {
	case t == core.NoTimeout:
		return "default"
	case t < 0:
		return fmt.Sprintf("%d(invalid)", t)
	case t == 0:
		return "unbounded"
	}
	return dur(t)
}
