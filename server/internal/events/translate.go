package events

import (
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// translator turns the scheduler's steps (runtime.Step: one event, its
// effects and the statuses of the models it touched, right after it) into
// Events. It replays nothing: what happened is in the effects (a Publish
// is a "loaded", a Reject carries its reason) and every Event carries the
// status the runtime took after the step. It keeps only what pairs an end
// with its start: the submission of each live ticket (for waits and the
// model of a Release) and the start of each backend job (for durations).
//
// Threading rule: used by the follower's goroutine under Hub.mu only.
type translator struct {
	tickets   map[core.Ticket]ticketInfo
	jobs      map[core.Job]jobInfo
	loadStart map[string]int64
	prev      map[string]core.ModelStatus // status after the last step that touched the model

	step stepState
	out  []Event

	status func(core.ModelStatus) any // an event's status object; nil: none
}

type ticketInfo struct {
	model, kind, op string
	t               int64
	granted         bool
}

type jobInfo struct {
	model, cause string
	t            int64
}

// stepState is the step being translated: the events it made so far and
// the statuses it carries.
type stepState struct {
	t         int64
	submitted core.Ticket // ticket a SubmitRequest of this step created
	events    []Event
	status    []core.ModelStatus
}

func newTranslator() *translator {
	return &translator{tickets: map[core.Ticket]ticketInfo{}, jobs: map[core.Job]jobInfo{},
		loadStart: map[string]int64{}, prev: map[string]core.ModelStatus{}}
}

// restart forgets everything: the subscription's first step (a snapshot of
// every model) follows. Tickets and jobs begun before it are unknown: their
// events carry no wait or duration.
func (t *translator) restart() {
	clear(t.tickets)
	clear(t.jobs)
	clear(t.loadStart)
	clear(t.prev)
	t.out = t.out[:0]
}

func ms(ns int64) *float64 {
	v := float64(ns) / 1e6
	return &v
}

// apply translates one step.
func (t *translator) apply(st *runtime.Step) {
	if st.Event.Kind == core.EvNone { // the subscription's snapshot
		for _, ms := range st.Status {
			t.prev[ms.ID] = ms
		}
		return
	}
	s := &t.step
	s.t, s.submitted, s.status = st.Event.Now, 0, st.Status
	s.events = s.events[:0]
	t.event(st)
	for i := range st.Effects {
		t.effect(&st.Effects[i])
	}
	t.flush()
}

// emit adds an event of the current step.
func (t *translator) emit(ev Event) {
	ev.T = t.step.t // Time is formatted when the event is sent (Hub.frame)
	t.step.events = append(t.step.events, ev)
}

func (t *translator) event(st *runtime.Step) {
	ev, tk := &st.Event, st.Ticket
	switch ev.Kind {
	case core.EvSubmitRequest:
		t.tickets[tk] = ticketInfo{model: ev.Model, kind: "request", t: ev.Now}
		t.step.submitted = tk
	case core.EvSubmitManager:
		if _, known := t.prev[ev.Model]; !known && ev.Op == core.OpApply && t.hasStatus(ev.Model) {
			t.emit(Event{Type: "registered", Model: ev.Model})
		}
		op := ev.Op.String()
		t.tickets[tk] = ticketInfo{model: ev.Model, kind: "manager", op: op, t: ev.Now}
		t.emit(Event{Type: "manager", Model: ev.Model, Kind: "manager", Op: op, Ticket: uint64(tk)})
	case core.EvSubmitBulkUnload:
		t.tickets[tk] = ticketInfo{kind: "bulk", op: "unload", t: ev.Now}
		t.emit(Event{Type: "bulk_unload", Kind: "bulk", Ticket: uint64(tk), Models: ev.Models})
	case core.EvRelease:
		info := t.tickets[ev.Ticket]
		delete(t.tickets, ev.Ticket)
		t.emit(Event{Type: "release", Model: info.model, Kind: "request", Ticket: uint64(ev.Ticket), Failed: ev.Failed})
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone:
		j := t.jobs[ev.Job]
		delete(t.jobs, ev.Job)
		if ev.Failed {
			typ := "load_failed"
			if ev.Kind == core.EvProbeDone {
				typ = "probe_failed"
			} else {
				delete(t.loadStart, j.model)
			}
			t.emit(Event{Type: typ, Model: j.model, Failed: true})
		}
	case core.EvTeardownDone:
		j := t.jobs[ev.Job]
		delete(t.jobs, ev.Job)
		e := Event{Type: "unloaded", Model: j.model, Cause: j.cause}
		if j.t > 0 {
			e.TookMS = ms(ev.Now - j.t)
		}
		t.emit(e)
	case core.EvBeginShutdown:
		t.emit(Event{Type: "shutdown"})
	}
}

func (t *translator) effect(e *runtime.StepEffect) {
	now := t.step.t
	switch e.Kind {
	case core.EfGrant:
		info := t.tickets[e.Ticket]
		info.granted = true
		t.tickets[e.Ticket] = info
		slot := int(e.Slot)
		ev := Event{Type: "admission", Model: e.ID, Kind: "request", Ticket: uint64(e.Ticket), Slot: &slot, Version: e.Version}
		if info.t > 0 {
			ev.WaitMS = ms(now - info.t)
		}
		t.emit(ev)
	case core.EfReject:
		info, ok := t.tickets[e.Ticket]
		delete(t.tickets, e.Ticket)
		model := e.ID
		if model == "" {
			model = info.model
		}
		ev := Event{Type: "rejection", Model: model, Kind: info.kind, Op: info.op, Ticket: uint64(e.Ticket),
			Code: e.Code.String(), Reason: e.Reason.String()}
		if ok {
			ev.WaitMS = ms(now - info.t)
		}
		t.emit(ev)
	case core.EfDone:
		info := t.tickets[e.Ticket]
		delete(t.tickets, e.Ticket)
		ev := Event{Type: "done", Model: info.model, Kind: info.kind, Op: info.op, Ticket: uint64(e.Ticket)}
		if e.Bulk != nil {
			ev.Models = e.Bulk.Unloaded
			if ev.Models == nil {
				ev.Models = []string{}
			}
		}
		if info.t > 0 {
			ev.WaitMS = ms(now - info.t)
		}
		t.emit(ev)
	case core.EfStartLoad:
		t.jobs[e.Job] = jobInfo{model: e.ID, t: now}
		t.loadStart[e.ID] = now
		ev := Event{Type: "load", Model: e.ID, Version: e.Version}
		if e.Config != nil {
			ev.Slots = e.Config.Slots
		}
		t.emit(ev)
	case core.EfStartClone:
		t.jobs[e.Job] = jobInfo{model: e.ID, t: now}
	case core.EfStartProbe:
		t.jobs[e.Job] = jobInfo{model: e.ID, t: now}
		t.emit(Event{Type: "probe", Model: e.ID})
	case core.EfStartTeardown:
		cause := ""
		if e.Cause != core.CauseNone {
			cause = e.Cause.String()
		}
		t.jobs[e.Job] = jobInfo{model: e.ID, cause: cause, t: now}
		typ := "unload"
		if e.Cause == core.CauseEvict {
			typ = "eviction"
		}
		t.emit(Event{Type: typ, Model: e.ID, Cause: cause})
	case core.EfPublish: // before the Grants it enables
		ev := Event{Type: "loaded", Model: e.ID, Capacity: int(e.Capacity), Version: e.Version}
		if t0, ok := t.loadStart[e.ID]; ok {
			ev.TookMS = ms(now - t0)
			delete(t.loadStart, e.ID)
		}
		t.emit(ev)
	case core.EfShutdownComplete:
		t.emit(Event{Type: "shutdown_complete"})
	}
}

// hasStatus reports whether the current step carries model's status.
func (t *translator) hasStatus(model string) bool {
	_, ok := t.statusOf(model)
	return ok
}

// statusOf is a model's status right after the current step, when the step
// touched it.
func (t *translator) statusOf(model string) (core.ModelStatus, bool) {
	for i := range t.step.status {
		if t.step.status[i].ID == model {
			return t.step.status[i], true
		}
	}
	return core.ModelStatus{}, false
}

// flush finishes the current step: it adds the queued, state and status
// events the step's statuses imply, gives every event its model's status
// after the step, and moves them to out.
func (t *translator) flush() {
	s := &t.step
	if tk := s.submitted; tk != 0 {
		if info, ok := t.tickets[tk]; ok && !info.granted {
			t.emit(Event{Type: "queued", Model: info.model, Kind: "request", Ticket: uint64(tk)})
		}
	}
	n := len(s.events)
	for _, st := range s.status {
		model := st.ID
		old, known := t.prev[model]
		if st.Unregistered { // its tombstone: a later PUT registers it again
			delete(t.prev, model)
			if known {
				t.emit(Event{Type: "unregistered", Model: model})
			}
			continue
		}
		t.prev[model] = st
		if !known {
			continue
		}
		if old.State != st.State {
			t.emit(Event{Type: "state", Model: model, From: old.State.String(), To: st.State.String()})
		}
		if old != st && !t.hasEvent(model, n) {
			t.emit(Event{Type: "status", Model: model})
		}
	}
	if t.status == nil {
		t.out = append(t.out, s.events...)
		s.events = s.events[:0]
		return
	}
	type made struct {
		id string
		v  any
	}
	var cache []made // one status object per model and step, shared by its events
	for i := range s.events {
		ev := &s.events[i]
		if ev.Model == "" {
			continue
		}
		for _, m := range cache {
			if m.id == ev.Model {
				ev.Status = m.v
			}
		}
		if ev.Status == nil {
			if st, ok := t.statusOf(ev.Model); ok && !st.Unregistered {
				v := t.status(st)
				ev.Status = v
				cache = append(cache, made{st.ID, v})
			}
		}
	}
	t.out = append(t.out, s.events...)
	s.events = s.events[:0]
}

// hasEvent reports whether one of the first n events of the step is about
// model.
func (t *translator) hasEvent(model string, n int) bool {
	for _, ev := range t.step.events[:n] {
		if ev.Model == model {
			return true
		}
	}
	return false
}
