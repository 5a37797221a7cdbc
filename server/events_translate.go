package server

import (
	"log/slog"

	"github.com/sluice-dev/sluice/core"
)

// translator turns the scheduler's records (one event record followed by
// its effect records per step, in machine order) into Events.
//
// It replays every event into a mirror: a private core.Machine with the
// runtime's options, the replay the trace validator does. After each step
// the mirror's status of a model is exactly the runtime's status right after
// that step, so every Event carries exact counters and the lifecycle
// transitions between steps are all seen. The mirror also knows each
// model's committed config (GET /v1/models/{id}/spec). Each effect the
// mirror produces is checked against the effect records that follow; if
// they ever differ, or the runtime drops the hub's subscription, the mirror
// is abandoned: statuses then come from one atomic snapshot per batch
// (core transitions inside a batch may then be missed) and clients get a
// reset event telling them to reload.
//
// Threading rule: used by the hub's goroutine under hub.mu only.
type translator struct {
	m   *core.Machine // nil once lost
	log *slog.Logger

	snap   map[string]core.ModelStatus // without the mirror: this batch's snapshot
	expect []expectedEffect            // mirror effects of the current step not yet seen

	tickets   map[uint64]ticketInfo
	jobs      map[uint64]jobInfo
	loadStart map[string]int64
	prev      map[string]core.ModelStatus // status after the last step that touched the model

	step stepState
	out  []Event

	created func(id string) int64 // a status object's created; nil: none
}

// Record names of the request path, which only the translator reads (the
// lifecycle names are beside the metrics feed).
var (
	evSubmitRequest = core.EvSubmitRequest.String()
	evSubmitManager = core.EvSubmitManager.String()
	efGrant         = core.EfGrant.String()
	efReject        = core.EfReject.String()
	efDone          = core.EfDone.String()
)

type expectedEffect struct {
	kind   string
	ticket uint64
}

type ticketInfo struct {
	model, kind, op string
	t               int64
	granted         bool
}

type jobInfo struct {
	model, what, cause string
	t                  int64
}

// stepState is the step being translated: its event record, the events it
// made so far and the models it touched.
type stepState struct {
	active    bool
	ev        string // the event record's Ev ("" for effects whose event came in an earlier batch)
	t         int64
	reason    string // rejection reason of this step
	submitted uint64 // ticket a SubmitRequest of this step created
	events    []Event
	touched   []string
}

// newTranslator returns a translator without a mirror; restart gives it one.
func newTranslator(log *slog.Logger) *translator {
	return &translator{log: log, tickets: map[uint64]ticketInfo{}, jobs: map[uint64]jobInfo{},
		loadStart: map[string]int64{}, prev: map[string]core.ModelStatus{}}
}

// restart makes m (a copy of the runtime's machine, taken with the
// subscription whose records follow) the mirror. Tickets and jobs begun
// before m are unknown: their events carry no wait or duration.
func (t *translator) restart(m *core.Machine) {
	if t.m == nil && t.step.active {
		t.flush()
	}
	t.m, t.snap, t.expect, t.step = m, nil, nil, stepState{}
	clear(t.tickets)
	clear(t.jobs)
	clear(t.loadStart)
	clear(t.prev)
	for _, st := range m.Snapshot() {
		t.prev[st.ID] = st
	}
}

// stop drops the mirror when the hub stops following the scheduler.
func (t *translator) stop() {
	t.m, t.snap, t.expect, t.step = nil, nil, nil, stepState{}
	clear(t.tickets)
	clear(t.jobs)
	clear(t.loadStart)
	clear(t.prev)
	t.out = t.out[:0]
}

// lose abandons the mirror (or the records after a dropped subscription)
// and tells clients to reload. A step in progress is kept and flushed later.
func (t *translator) lose(why string) {
	if t.m != nil {
		t.log.Warn("events: scheduler mirror abandoned; statuses now come from snapshots", "why", why)
	}
	t.m, t.expect = nil, nil
	clear(t.tickets)
	clear(t.jobs)
	clear(t.loadStart)
	t.out = append(t.out, Event{Type: "reset", Reason: why, T: t.step.t})
}

// endBatch flushes a step that cannot grow any more: without the mirror the
// translator cannot tell whether more effects of the step will come, so it
// flushes at the end of every batch.
func (t *translator) endBatch() {
	if t.step.active && t.m == nil {
		t.flush()
	}
}

func ms(ns int64) *float64 {
	v := float64(ns) / 1e6
	return &v
}

// record translates one record.
func (t *translator) record(r *core.Record) {
	if r.Ev != "" {
		if t.step.active {
			t.flush()
		}
		if t.m != nil && len(t.expect) > 0 {
			t.lose("the scheduler mirror missed effects of a step")
		}
		t.begin(r.Ev, r.T)
		t.stepMirror(r)
		t.event(r)
	} else {
		if t.m != nil {
			if len(t.expect) == 0 || t.expect[0].kind != r.Ef || t.expect[0].ticket != r.Ticket {
				t.lose("the scheduler mirror diverged from the runtime")
			} else {
				t.expect = t.expect[1:]
			}
		}
		if !t.step.active {
			t.begin("", r.T)
		}
		t.effect(r)
	}
	if t.m != nil && len(t.expect) == 0 {
		t.flush() // the step is complete
	}
}

func (t *translator) begin(ev string, now int64) {
	t.step.active, t.step.ev, t.step.t, t.step.reason, t.step.submitted = true, ev, now, "", 0
	t.step.events, t.step.touched = t.step.events[:0], t.step.touched[:0]
}

// stepMirror applies an event record to the mirror and notes the effects it
// must be followed by.
func (t *translator) stepMirror(r *core.Record) {
	if t.m == nil {
		return
	}
	ev, err := r.Event()
	if err != nil {
		t.lose("unreadable record: " + err.Error())
		return
	}
	tk, err := t.m.Step(ev)
	if err != nil || (ev.Kind == core.EvSubmitRequest || ev.Kind == core.EvSubmitManager || ev.Kind == core.EvSubmitBulkUnload) &&
		uint64(tk) != r.Ticket {
		t.m.Advance()
		t.lose("the scheduler mirror diverged from the runtime")
		return
	}
	for _, e := range t.m.Effects() {
		t.expect = append(t.expect, expectedEffect{kind: e.Kind.String(), ticket: uint64(e.Ticket)})
	}
	t.m.Advance()
}

// emit adds an event of the current step.
func (t *translator) emit(ev Event) {
	ev.T = t.step.t // Time is formatted when the event is sent (eventHub.frame)
	t.step.events = append(t.step.events, ev)
	t.touch(ev.Model)
}

func (t *translator) touch(model string) {
	if model == "" {
		return
	}
	for _, m := range t.step.touched {
		if m == model {
			return
		}
	}
	t.step.touched = append(t.step.touched, model)
}

func (t *translator) event(r *core.Record) {
	switch r.Ev {
	case evSubmitRequest:
		t.tickets[r.Ticket] = ticketInfo{model: r.Model, kind: "request", t: r.T}
		t.step.submitted = r.Ticket
		t.touch(r.Model)
	case evSubmitManager:
		if _, known := t.prev[r.Model]; !known && r.Op == core.OpApply.String() {
			t.emit(Event{Type: "registered", Model: r.Model})
		}
		t.tickets[r.Ticket] = ticketInfo{model: r.Model, kind: "manager", op: r.Op, t: r.T}
		t.emit(Event{Type: "manager", Model: r.Model, Kind: "manager", Op: r.Op, Ticket: r.Ticket})
	case evSubmitBulkUnload:
		t.tickets[r.Ticket] = ticketInfo{kind: "bulk", op: "unload", t: r.T}
		t.emit(Event{Type: "bulk_unload", Kind: "bulk", Ticket: r.Ticket, Models: r.Models})
		for _, m := range r.Models {
			if _, known := t.prev[m]; known {
				t.touch(m)
			}
		}
	case evCancel:
		t.step.reason = r.Reason
		t.touch(t.tickets[r.Ticket].model)
	case evRelease:
		info := t.tickets[r.Ticket]
		delete(t.tickets, r.Ticket)
		t.emit(Event{Type: "release", Model: info.model, Kind: "request", Ticket: r.Ticket, Failed: r.Failed})
	case evLoadDone, evCloneDone, evProbeDone:
		j := t.jobs[r.Job]
		delete(t.jobs, r.Job)
		if r.Failed {
			typ := "load_failed"
			if r.Ev == evProbeDone {
				typ = "probe_failed"
			} else {
				delete(t.loadStart, j.model)
			}
			t.step.reason = "load_failed"
			t.emit(Event{Type: typ, Model: j.model, Failed: true})
		} else if st, ok := t.statusOf(j.model); ok && st.Loaded && !t.prev[j.model].Loaded {
			t.loaded(j.model, st) // published by this step, before the grants it enables
		} else {
			t.touch(j.model)
		}
	case evTeardownDone:
		j := t.jobs[r.Job]
		delete(t.jobs, r.Job)
		ev := Event{Type: "unloaded", Model: j.model, Cause: j.cause}
		if j.t > 0 {
			ev.TookMS = ms(r.T - j.t)
		}
		t.emit(ev)
	case evBeginShutdown:
		t.step.reason = "shutdown"
		t.emit(Event{Type: "shutdown"})
	}
}

func (t *translator) effect(r *core.Record) {
	switch r.Ef {
	case efGrant:
		info := t.tickets[r.Ticket]
		info.granted = true
		t.tickets[r.Ticket] = info
		slot := int(r.Slot)
		ev := Event{Type: "admission", Model: r.Model, Kind: "request", Ticket: r.Ticket, Slot: &slot, Version: r.Version}
		if info.t > 0 {
			ev.WaitMS = ms(r.T - info.t)
		}
		t.emit(ev)
	case efReject:
		info, ok := t.tickets[r.Ticket]
		delete(t.tickets, r.Ticket)
		reason := t.step.reason
		if reason == "" && t.step.submitted == r.Ticket {
			reason = "refused_on_arrival"
		}
		model := r.Model
		if model == "" {
			model = info.model
		}
		ev := Event{Type: "rejection", Model: model, Kind: info.kind, Op: info.op, Ticket: r.Ticket, Code: r.Code, Reason: reason}
		if ok {
			ev.WaitMS = ms(r.T - info.t)
		}
		t.emit(ev)
	case efDone:
		info := t.tickets[r.Ticket]
		delete(t.tickets, r.Ticket)
		ev := Event{Type: "done", Model: info.model, Kind: info.kind, Op: info.op, Ticket: r.Ticket, Models: r.Unloaded}
		if info.t > 0 {
			ev.WaitMS = ms(r.T - info.t)
		}
		t.emit(ev)
		for _, m := range r.Unloaded {
			t.touch(m)
		}
	case efStartLoad:
		t.jobs[r.Job] = jobInfo{model: r.Model, what: "load", t: r.T}
		t.loadStart[r.Model] = r.T
		ev := Event{Type: "load", Model: r.Model, Version: r.Version}
		if r.Config != nil {
			ev.Slots = r.Config.Slots
		}
		t.emit(ev)
	case efStartClone:
		t.jobs[r.Job] = jobInfo{model: r.Model, what: "clone", t: r.T}
	case efStartProbe:
		t.jobs[r.Job] = jobInfo{model: r.Model, what: "probe", t: r.T}
		t.emit(Event{Type: "probe", Model: r.Model})
	case efStartTeardown:
		t.jobs[r.Job] = jobInfo{model: r.Model, what: "teardown", cause: r.Cause, t: r.T}
		typ := "unload"
		if r.Cause == causeEvict {
			typ = "eviction"
		}
		t.emit(Event{Type: typ, Model: r.Model, Cause: r.Cause})
	case efShutdownComplete:
		t.emit(Event{Type: "shutdown_complete"})
	}
}

// statusOf is a model's status right after the current step.
func (t *translator) statusOf(model string) (core.ModelStatus, bool) {
	if t.m != nil {
		h, ok := t.m.Lookup(model)
		if !ok {
			return core.ModelStatus{}, false
		}
		return t.m.Status(h), true
	}
	st, ok := t.snap[model]
	return st, ok
}

// flush finishes the current step: it adds the queued, loaded, state and
// status events the step implies, gives every event its model's status
// after the step, and moves them to out.
func (t *translator) flush() {
	s := &t.step
	s.active = false
	if tk := s.submitted; tk != 0 {
		if info, ok := t.tickets[tk]; ok && !info.granted {
			t.emit(Event{Type: "queued", Model: info.model, Kind: "request", Ticket: tk})
		}
	}
	n := len(s.events)
	for _, model := range s.touched {
		st, ok := t.statusOf(model)
		if !ok {
			continue
		}
		old, known := t.prev[model]
		t.prev[model] = st
		if !known {
			continue
		}
		if !old.Loaded && st.Loaded && !t.hasType("loaded", model) {
			t.loaded(model, st)
		}
		if old.State != st.State {
			t.emit(Event{Type: "state", Model: model, From: old.State.String(), To: st.State.String()})
		}
		if old != st && !t.hasEvent(model, n) {
			t.emit(Event{Type: "status", Model: model})
		}
	}
	var cache []*Model // one status object per model and step, shared by its events
	for i := range s.events {
		ev := &s.events[i]
		if ev.Model == "" {
			continue
		}
		for _, m := range cache {
			if m.ID == ev.Model {
				ev.Status = m
			}
		}
		if ev.Status == nil {
			if st, ok := t.statusOf(ev.Model); ok {
				m := modelOf(st)
				if t.created != nil {
					m.Created = t.created(st.ID)
				}
				ev.Status = &m
				cache = append(cache, &m)
			}
		}
	}
	t.out = append(t.out, s.events...)
	s.events = s.events[:0]
}

// loaded emits the publication of model's pool.
func (t *translator) loaded(model string, st core.ModelStatus) {
	ev := Event{Type: "loaded", Model: model, Capacity: st.MaxParallelSlots, Version: st.ConfigVersion}
	if t0, ok := t.loadStart[model]; ok {
		ev.TookMS = ms(t.step.t - t0)
		delete(t.loadStart, model)
	}
	t.emit(ev)
}

func (t *translator) hasType(typ, model string) bool {
	for _, ev := range t.step.events {
		if ev.Type == typ && ev.Model == model {
			return true
		}
	}
	return false
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

var (
	evCancel           = core.EvCancel.String()
	evRelease          = core.EvRelease.String()
	evProbeDone        = core.EvProbeDone.String()
	evSubmitBulkUnload = core.EvSubmitBulkUnload.String()
	evBeginShutdown    = core.EvBeginShutdown.String()
	efStartProbe       = core.EfStartProbe.String()
	efShutdownComplete = core.EfShutdownComplete.String()
	causeEvict         = core.CauseEvict.String()
)
