package abstract

import (
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice/core"
)

// Action is one event action with its parameters, as a value.
type Action struct {
	Kind    core.EventKind
	Model   string   // SubmitRequest, SubmitManager, and the model of a job completion
	Models  []string // SubmitBulkUnload
	Op      core.Op  // SubmitManager
	Cfg     *Config  // SubmitManager with OpApply
	Timeout int64    // SubmitRequest, SubmitManager: override, core.NoTimeout for the default
	// Ticket is the target of Cancel and Release, and the number the new
	// ticket of a submission gets (0: the next from State.NextID).
	Ticket   uint64
	Reason   core.Reason
	Failed   bool
	Capacity int
	// Now is when the event happened (0: the next tick of State.Clock); only
	// the order of times matters, for least-recently-used eviction.
	Now int64
	// Tick's parameters, as in the TLA+ Tick(expire, idle, ended): the queued
	// tickets that expire and the idle models that retire. Unless TickGiven,
	// Step explores every choice; the load backoffs that end (ended) are
	// always explored, as no effect shows them.
	Expire    []uint64
	Retire    []string
	TickGiven bool
	// A SubmitManager apply that registers a model restored from the
	// persistent registry (core.Config's BaseVersion and RegisterOnly,
	// CONTRACT.md persist.restore): its committed version starts at
	// BaseVersion (at least 1), and RegisterOnly registers it unloaded, the
	// manager granted like an unload. A reconfigure ignores both.
	BaseVersion  uint64
	RegisterOnly bool
}

// Outcome is one quiescent successor of a step with the effects emitted on
// the way.
type Outcome struct {
	State   *State
	Effects []Effect
}

// run is a state being changed by one step, with its effects.
type run struct {
	s   *State
	one [1]Outcome // the outcome of a run that settles along one chain
	out []Effect
	p   *Params
	now int64
	// skipBackoff admits past a load backoff: in loose mode (unknown
	// options) whether the machine backs off at all is open.
	skipBackoff bool
}

func (r *run) fork() *run {
	return &run{s: r.s.Clone(), out: append([]Effect(nil), r.out...), p: r.p, now: r.now}
}

func (r *run) emit(e Effect) { r.out = append(r.out, e) }

// Step applies the event action a to s and settles. It returns every
// quiescent outcome (deduplicated), or an error when a does not apply to s
// (a completion for a job that is not running, for example). An action that
// changes nothing returns one outcome equal to s: a stutter.
func Step(s *State, a Action, p *Params) ([]Outcome, error) {
	return step(&run{s: s.Clone(), p: p, now: a.Now}, a)
}

// Stepper is Step reusing its memory from call to call: the outcomes of a
// call (their states and effects) are valid until the next call. A Stepper
// is used by one goroutine.
type Stepper struct {
	r       run // the step's run, here so that it is not allocated per call
	s       State
	models  []Model
	hs      []Holder
	qs      []Entry
	loaders []int
	bulks   []Bulk
	out     []Effect
}

// Step is Step(s, a, p) into w's memory.
func (w *Stepper) Step(s *State, a Action, p *Params) ([]Outcome, error) {
	w.cloneInto(s)
	w.r = run{s: &w.s, out: w.out[:0], p: p, now: a.Now}
	outs, err := step(&w.r, a)
	if len(outs) == 1 && outs[0].State == &w.s {
		w.out = outs[0].Effects[:0] // keep the grown buffer
	}
	return outs, err
}

// cloneInto makes w.s a deep copy of s in w's buffers (as Clone does: each
// model's holders and queue are slices without spare capacity, so an append
// reallocates instead of writing into the next one's).
func (w *Stepper) cloneInto(s *State) {
	nh, nq := 0, 0
	for i := range s.Models {
		nh += len(s.Models[i].Holders)
		nq += len(s.Models[i].Queue)
	}
	w.hs = slices.Grow(w.hs[:0], nh)[:nh]
	w.qs = slices.Grow(w.qs[:0], nq)[:nq]
	w.models = append(w.models[:0], s.Models...)
	hs, qs := w.hs, w.qs
	for i := range w.models {
		md := &w.models[i]
		if n := copy(hs, md.Holders); n > 0 {
			md.Holders, hs = hs[:n:n], hs[n:]
		} else {
			md.Holders = nil
		}
		if n := copy(qs, md.Queue); n > 0 {
			md.Queue, qs = qs[:n:n], qs[n:]
		} else {
			md.Queue = nil
		}
	}
	w.loaders = append(w.loaders[:0], s.Loaders...)
	w.bulks = append(w.bulks[:0], s.Bulks...)
	w.s = *s
	w.s.Models = w.models[:len(w.models):len(w.models)]
	w.s.Loaders = w.loaders[:len(w.loaders):len(w.loaders)]
	w.s.Bulks = w.bulks[:len(w.bulks):len(w.bulks)]
	w.s.Evicted = nil
}

func step(r *run, a Action) ([]Outcome, error) {
	if r.now == 0 {
		r.s.Clock++
		r.now = r.s.Clock
	} else if r.now > r.s.Clock {
		r.s.Clock = r.now
	}
	var runs []*run
	var err error
	switch a.Kind {
	case core.EvSubmitRequest:
		runs = r.SubmitRequest(a)
	case core.EvSubmitManager:
		runs = r.SubmitManager(a)
	case core.EvSubmitBulkUnload:
		runs = r.SubmitBulkUnload(a)
	case core.EvCancel:
		runs = r.Cancel(a)
	case core.EvRelease:
		runs = r.Release(a)
	case core.EvLoadDone:
		runs, err = r.LoadDone(a)
	case core.EvCloneDone:
		runs, err = r.CloneDone(a)
	case core.EvProbeDone:
		runs, err = r.ProbeDone(a)
	case core.EvTeardownDone:
		runs, err = r.TeardownDone(a)
	case core.EvTick:
		if a.TickGiven {
			runs = r.TickGiven(a.Expire, a.Retire)
		} else {
			runs = r.Tick()
		}
	case core.EvBeginShutdown:
		runs = r.BeginShutdown()
	default:
		err = fmt.Errorf("abstract: unknown action %d", a.Kind)
	}
	if err != nil {
		return nil, err
	}
	return settleAll(runs)
}

func (r *run) newID(a Action) uint64 {
	if a.Ticket != 0 {
		if a.Ticket > r.s.NextID {
			r.s.NextID = a.Ticket
		}
		return a.Ticket
	}
	r.s.NextID++
	return r.s.NextID
}

func (r *run) nextSeq() uint64 {
	r.s.Seq++
	return r.s.Seq
}

// bounded is the contract's effective admission timeout (request override,
// then the model's, then the server default, capped by the ceiling) being
// finite. In loose mode every wait may be bounded: the options are unknown.
func (r *run) bounded(md *Model, override int64) bool {
	if r.p.Loose {
		return true
	}
	d := override
	if d < 0 {
		d = md.Cfg.AdmissionTimeout // NoTimeout: the server default; 0: unbounded
		if d < 0 {
			d = r.p.DefaultTimeout
		}
	}
	if c := r.p.Ceiling; c > 0 && (d == 0 || d > c) {
		d = c
	}
	return d > 0
}

// SubmitRequest (CONTRACT order.request-then-request,
// order.manager-then-request, time.queue-limit, time.overdue-blockers):
// shutting down rejects; an empty FIFO with a spare slot admits; a full
// queue or overdue blockers reject server_busy; otherwise the request queues
// behind everything earlier.
func (r *run) SubmitRequest(a Action) []*run {
	id := r.newID(a)
	i := r.s.Lookup(a.Model)
	seq := r.nextSeq()
	if i < 0 || r.s.Shutdown {
		code := core.CodeNotFound
		if r.s.Shutdown {
			code = core.CodeShuttingDown
		}
		r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: code, Model: max(i, 0)})
		return []*run{r}
	}
	md := &r.s.Models[i]
	if len(md.Queue) == 0 && !md.HasMgr && r.admittable(i) && md.Active() < md.Cfg.Slots {
		var runs []*run
		if r.backoffOpen(i) {
			g := r.fork()
			g.skipBackoff = true
			g.admit(i, id, seq)
			g.skipBackoff = false
			runs = append(runs, g)
		}
		r.admit(i, id, seq)
		return append(runs, r)
	}
	if md.Cfg.MaxQueue > 0 && md.QueuedRequests() >= md.Cfg.MaxQueue {
		r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeServerBusy, Model: i})
		return []*run{r}
	}
	b := r.bounded(md, a.Timeout)
	var runs []*run
	if b && md.Active() > 0 {
		// Overdue blockers may cause immediate rejection (CONTRACT
		// time.overdue-blockers): whether every occupied slot is overdue is
		// a matter of time, which the spec leaves open.
		f := r.fork()
		f.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeServerBusy, Model: i})
		runs = append(runs, f)
	}
	md.Queue = append(md.Queue, Entry{ID: id, Kind: KReq, Bounded: b, Seq: seq})
	return append(runs, r)
}

// SubmitManager (CONTRACT reg.new, reg.invalid,
// err.not-found, time.manager-timeout): invalid
// configs and operations reject before anything changes; an unknown ID is
// registered by OpApply (a stable entry published before its first load) and
// not found otherwise; the manager queues as an exclusive barrier.
func (r *run) SubmitManager(a Action) []*run {
	id := r.newID(a)
	seq := r.nextSeq()
	i := r.s.Lookup(a.Model)
	reject := func(code core.Code) []*run {
		r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: code, Model: max(i, 0)})
		return []*run{r}
	}
	if (a.Op == core.OpApply && !a.Cfg.valid()) ||
		(a.Op != core.OpApply && a.Op != core.OpLoad && a.Op != core.OpUnload && a.Op != core.OpUnregister) {
		return reject(core.CodeInvalid)
	}
	if r.s.Shutdown {
		return reject(core.CodeShuttingDown)
	}
	op, cfg, timeout := a.Op, a.Cfg, a.Timeout
	if i < 0 {
		if op != core.OpApply {
			return reject(core.CodeNotFound)
		}
		// A tombstone's entry is reused and its versions continue
		// (CONTRACT.md unreg.re-register); an unknown ID appends one.
		if e := r.s.Entry(a.Model); e >= 0 {
			i = e
			r.s.Models[i] = Model{ID: a.Model, Life: core.Unloaded, Cfg: cfg, Ver: max(a.BaseVersion, r.s.Models[i].Ver+1)}
		} else {
			r.s.Models = append(r.s.Models, Model{ID: a.Model, Life: core.Unloaded, Cfg: cfg, Ver: max(a.BaseVersion, 1)})
			i = len(r.s.Models) - 1
		}
		op, cfg, timeout = core.OpLoad, nil, 0
		if a.RegisterOnly {
			op = core.OpUnload // restored unloaded: nothing to load or tear down
		}
	}
	if op != core.OpApply {
		cfg = nil
	}
	md := &r.s.Models[i]
	b := r.bounded(md, timeout)
	var runs []*run
	if b && md.Active() > 0 {
		// A targeted manager with a deadline fails fast when every occupied
		// slot is overdue (CONTRACT time.overdue-blockers); a new registration has no slots.
		f := r.fork()
		f.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeServerBusy, Model: i})
		runs = append(runs, f)
	}
	md.Queue = append(md.Queue, Entry{ID: id, Kind: KMgr, Op: op, Cfg: cfg, Bounded: b, Seq: seq})
	return append(runs, r)
}

// SubmitBulkUnload (CONTRACT order.bulk-then-bulk,
// time.zero-and-bulk): a registry snapshot, then one
// barrier per registered member published in this one step; unknown IDs go
// to not_found; bulk waits are unbounded.
func (r *run) SubmitBulkUnload(a Action) []*run {
	id := r.newID(a)
	seq := r.nextSeq()
	res := &core.BulkResult{}
	if r.s.Shutdown {
		r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeShuttingDown})
		return []*run{r}
	}
	seen := map[string]bool{}
	var members []int
	for _, m := range a.Models {
		if seen[m] {
			continue
		}
		seen[m] = true
		if i := r.s.Lookup(m); i >= 0 {
			res.Unloaded = append(res.Unloaded, m)
			members = append(members, i)
		} else {
			res.NotFound = append(res.NotFound, m)
		}
	}
	if len(members) == 0 {
		r.emit(Effect{Kind: core.EfDone, Ticket: id, Bulk: res})
		return []*run{r}
	}
	r.s.Bulks = append(r.s.Bulks, Bulk{ID: id, Seq: seq, Result: res})
	for _, i := range members {
		md := &r.s.Models[i]
		md.Queue = append(md.Queue, Entry{Kind: KMember, Op: core.OpUnload, Bulk: id, Seq: r.nextSeq()})
	}
	return []*run{r}
}

// Cancel (CONTRACT time.admission-timeout,
// time.disconnect-queued, time.disconnect-waiting-init, order.bulk-cancel): a queued ticket
// leaves holding nothing (timeout: server_busy); a disconnected request
// waiting for its pool gives its slot back and withdraws a load nobody waits
// for; a disconnected bulk withdraws its queued barriers. Anything else is a
// stutter: a granted request is released, a granted manager runs on.
func (r *run) Cancel(a Action) []*run {
	where, i, k := r.s.FindTicket(a.Ticket)
	code := core.CodeCancelled
	if a.Reason == core.ReasonTimeout {
		code = core.CodeServerBusy
	}
	switch where {
	case PlaceQueued:
		md := &r.s.Models[i]
		e := md.Queue[k]
		if a.Reason == core.ReasonTimeout && !e.Bounded && !r.p.Loose {
			return []*run{r} // no deadline, so no timeout: nothing changes
		}
		md.Queue = remove(md.Queue, k)
		r.emit(Effect{Kind: core.EfReject, Ticket: e.ID, Code: code, Model: i})
	case PlaceWait:
		if a.Reason != core.ReasonDisconnect {
			return []*run{r}
		}
		md := &r.s.Models[i]
		h := md.Holders[k]
		md.Holders = remove(md.Holders, k)
		r.emit(Effect{Kind: core.EfReject, Ticket: h.ID, Code: code, Model: i})
		// A queued request takes the freed slot, and the pending load with it:
		// the load keeps its place; only a load nobody waits for is withdrawn.
		for r.pumpEnabled(i) {
			r.Pump(i)
		}
		if md := &r.s.Models[i]; md.WaitInit() == 0 && !md.HasMgr && r.s.InLoaders(i) {
			r.withdrawLoad(i)
		}
	case PlaceBulk:
		if a.Reason != core.ReasonDisconnect {
			return []*run{r}
		}
		b := &r.s.Bulks[k]
		b.Reason = core.ReasonDisconnect
		for x := range r.s.Models {
			md := &r.s.Models[x]
			q := md.Queue[:0]
			for _, e := range md.Queue {
				if e.Kind != KMember || e.Bulk != a.Ticket {
					q = append(q, e)
				}
			}
			md.Queue = q
		}
		r.bulkCheck(a.Ticket)
	}
	return []*run{r}
}

// Release ends a running request's lease (success or failure alike). A
// release of anything else changes nothing.
func (r *run) Release(a Action) []*run {
	where, i, k := r.s.FindTicket(a.Ticket)
	if where == PlaceRunning {
		md := &r.s.Models[i]
		md.Holders = remove(md.Holders, k)
		md.LastUse = r.now
	}
	return []*run{r}
}

func (s *State) bulk(id uint64) *Bulk {
	for k := range s.Bulks {
		if s.Bulks[k].ID == id {
			return &s.Bulks[k]
		}
	}
	return nil
}

func remove[T any](xs []T, k int) []T {
	out := make([]T, 0, len(xs)-1)
	out = append(out, xs[:k]...)
	return append(out, xs[k+1:]...)
}
