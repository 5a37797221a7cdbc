package runtime

import (
	"github.com/sluice-dev/sluice/core"
)

// Step is one critical section as the runtime's observers see it: the core
// event it applied (its time is Event.Now), the ticket a submission got,
// the effects the machine gave back, in order, each with its model's ID,
// and, for observers that ask for it (ObserveOptions.Status), the status
// of every model the step touched, taken right after it under the same
// lock. The trace, the metrics and the event stream are all built from
// Steps: none of them replays the machine or re-derives a decision. A Step
// and everything it points to is shared between observers: read only.
type Step struct {
	Event   core.Event
	Ticket  core.Ticket
	Effects []StepEffect
	Status  []core.ModelStatus
}

// StepEffect is one effect of a Step with the ID of its model ("" for a
// ShutdownComplete or a ticket of no model).
type StepEffect struct {
	core.Effect
	ID string
}

// ObserveOptions choose what an observer receives.
type ObserveOptions struct {
	// Buffer is how many steps the observer may lag behind; one more and it
	// is dropped: its channel is closed. At least 1.
	Buffer int
	// Lifecycle restricts the observer to steps with backend work: a
	// completion (LoadDone, CloneDone, ProbeDone, TeardownDone) or a
	// StartLoad, StartClone, StartProbe, StartTeardown, Publish or Retire
	// effect. Admissions and releases that start no backend step then cost
	// the request path nothing.
	Lifecycle bool
	// Status makes every step carry the statuses of the models it touched,
	// and the first step (Event.Kind core.EvNone, taken in the critical
	// section of the subscription) the status of every model: the state
	// the following steps apply to.
	Status bool

	_ struct{}
}

// observer is one subscription: typed steps or, for Subscribe, records.
type observer struct {
	steps  chan Step
	recs   chan core.Record
	life   bool
	status bool
	closed bool
}

// Observe subscribes to the runtime's steps from now on, in the order the
// machine processed them, and returns a function that ends the
// subscription. Steps are handed over without ever blocking the scheduler:
// an observer more than Buffer steps behind is dropped (its channel is
// closed) and may subscribe again. While a full observer (not Lifecycle)
// or the trace exists, every request pays for its steps: the admission
// fast path is off.
func (r *Runtime) Observe(o ObserveOptions) (<-chan Step, func()) {
	ob := &observer{steps: make(chan Step, max(o.Buffer, 1)), life: o.Lifecycle, status: o.Status}
	r.mu.Lock()
	if o.Status {
		ob.steps <- Step{Event: core.Event{Kind: core.EvNone, Now: r.last}, Status: r.m.Snapshot()}
	}
	r.addObserverLocked(ob)
	r.mu.Unlock()
	return ob.steps, func() { r.dropObserver(ob) }
}

// Reobserve changes the options of the subscription whose channel is ch,
// in one critical section, with no step lost or doubled: ch is closed after
// the steps of before the change, and the returned channel (of o.Buffer)
// carries every step from the change on, starting, with o.Status, with a
// snapshot of every model as Observe does. The subscription's cancel
// function ends it on the new channel. One observer can so serve several
// consumers, following only the lifecycle while none needs more and every
// step with statuses while one does, without a second subscription. It
// reports false, and leaves everything as it was, when ch is no live
// subscription (it was cancelled or dropped for falling behind).
func (r *Runtime) Reobserve(ch <-chan Step, o ObserveOptions) (<-chan Step, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ob := range r.subs {
		if ob.steps == nil || (<-chan Step)(ob.steps) != ch {
			continue
		}
		next := make(chan Step, max(o.Buffer, 1))
		if o.Status {
			next <- Step{Event: core.Event{Kind: core.EvNone, Now: r.last}, Status: r.m.Snapshot()}
		}
		close(ob.steps)
		ob.steps, ob.life, ob.status = next, o.Lifecycle, o.Status
		r.setObsLocked()
		return next, true
	}
	return nil, false
}

// Subscribe returns a channel that receives the trace record (core.Record)
// of every event and effect from now on, in machine order, and a function
// that ends the subscription: Observe in the trace's format, for tests and
// tools that read records. A subscriber more than buffer records behind is
// dropped and its channel closed.
func (r *Runtime) Subscribe(buffer int) (<-chan core.Record, func()) {
	ob := &observer{recs: make(chan core.Record, max(buffer, 1))}
	r.mu.Lock()
	r.addObserverLocked(ob)
	r.mu.Unlock()
	return ob.recs, func() { r.dropObserver(ob) }
}

func (r *Runtime) addObserverLocked(ob *observer) {
	r.subs = append(r.subs, ob)
	r.setObsLocked()
}

func (r *Runtime) dropObserver(ob *observer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(ob)
}

func (r *Runtime) dropLocked(ob *observer) {
	for i, s := range r.subs {
		if s == ob {
			r.subs = append(r.subs[:i], r.subs[i+1:]...)
			break
		}
	}
	if !ob.closed {
		ob.closed = true
		if ob.steps != nil {
			close(ob.steps)
		} else {
			close(ob.recs)
		}
	}
	r.setObsLocked()
}

// setObsLocked recomputes which steps the machine's events must build.
func (r *Runtime) setObsLocked() {
	r.obs, r.obsLife, r.obsStatus = r.trace != nil, false, false
	for _, s := range r.subs {
		if s.life {
			r.obsLife = true
		} else {
			r.obs = true
		}
		r.obsStatus = r.obsStatus || s.status
	}
}

// lifecycleStep reports whether a step has backend work (ObserveOptions.Lifecycle).
func lifecycleStep(ev *core.Event, effs []core.Effect) bool {
	switch ev.Kind {
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		return true
	}
	for i := range effs {
		switch effs[i].Kind {
		case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown, core.EfPublish, core.EfRetire:
			return true
		}
	}
	return false
}

// observeLocked builds the step of the event just applied, once, and hands
// it to the trace and every observer that wants it, without blocking.
func (r *Runtime) observeLocked(ev *core.Event, tk core.Ticket, effs []core.Effect) {
	life := lifecycleStep(ev, effs)
	if !r.obs && !life {
		return
	}
	st := Step{Event: *ev, Ticket: tk, Effects: make([]StepEffect, len(effs))}
	for i := range effs {
		st.Effects[i] = StepEffect{Effect: effs[i], ID: r.effectID(&effs[i])}
	}
	if r.obsStatus {
		st.Status = r.touchedStatusLocked()
	}
	var recs []core.Record // built once, for the trace and the record subscribers
	if r.trace != nil || r.hasRecordSubsLocked() {
		recs = stepRecords(&st)
	}
	if r.trace != nil {
		for i := range recs {
			if line, err := core.MarshalRecord(recs[i]); err == nil {
				r.tbuf = append(r.tbuf, line...)
			} else {
				r.log.Error("runtime: trace record", "err", err)
			}
		}
	}
	for i := 0; i < len(r.subs); i++ {
		ob := r.subs[i]
		if ob.life && !life {
			continue
		}
		if !ob.offer(&st, recs) {
			r.log.Warn("runtime: dropping a slow observer")
			r.dropLocked(ob)
			i--
		}
	}
}

// offer hands a step (or its records) to an observer without blocking; it
// reports false when the observer's buffer is full.
func (ob *observer) offer(st *Step, recs []core.Record) bool {
	if ob.steps != nil {
		select {
		case ob.steps <- *st:
			return true
		default:
			return false
		}
	}
	for i := range recs {
		select {
		case ob.recs <- recs[i]:
		default:
			return false
		}
	}
	return true
}

func (r *Runtime) hasRecordSubsLocked() bool {
	for _, ob := range r.subs {
		if ob.recs != nil {
			return true
		}
	}
	return false
}

func (r *Runtime) effectID(e *core.Effect) string {
	if e.Kind == core.EfShutdownComplete || int(e.Model) >= r.m.Len() {
		return ""
	}
	return r.m.ID(e.Model)
}

// touchedStatusLocked returns the statuses of the models the step touched:
// core.Machine.Touched names every model whose status the step changed
// (core's rapid check checkTouched holds it to that), so nothing here
// re-derives which models an event concerns.
func (r *Runtime) touchedStatusLocked() []core.ModelStatus {
	hs := r.m.Touched()
	out := make([]core.ModelStatus, len(hs))
	for k, h := range hs {
		out[k] = r.m.Status(h)
	}
	return out
}

// stepRecords returns the trace records of a step: its event, then its
// effects.
func stepRecords(st *Step) []core.Record {
	recs := make([]core.Record, 0, 1+len(st.Effects))
	recs = append(recs, core.EventRecord(st.Event, st.Ticket))
	for i := range st.Effects {
		recs = append(recs, core.EffectRecordOf(st.Event.Now, st.Effects[i].ID, st.Effects[i].Effect))
	}
	return recs
}

// flushTrace writes the buffered trace lines. tmu keeps writes in machine
// order; the scheduler lock is held only to swap buffers, never across the
// write.
func (r *Runtime) flushTrace() {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	r.mu.Lock()
	b := r.tbuf
	r.tbuf = r.tspare[:0]
	r.mu.Unlock()
	if len(b) > 0 {
		if _, err := r.trace.Write(b); err != nil {
			r.log.Error("runtime: trace write", "err", err)
		}
	}
	r.tspare = b[:0]
}
