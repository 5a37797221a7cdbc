package core

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// A random workload over the machine, shared by the rapid state-machine test
// and the mutant check. The chooser picks every decision, so rapid can shrink
// a failure and a seeded generator can replay one. After every event the
// machine's invariants and a small reference model of what clients observe
// are checked; errors are returned, never fatal.

type chooser interface {
	intn(label string, n int) int
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(_ string, n int) int { return c.r.IntN(n) }

var wlModels = []string{"a", "b", "c"}

// completion is the event that completes a backend job of each kind.
var completion = map[EffectKind]EventKind{EfStartLoad: EvLoadDone, EfStartClone: EvCloneDone, EfStartProbe: EvProbeDone,
	EfStartTeardown: EvTeardownDone}

// observed is what the reference model knows of one ticket.
type observed struct {
	kind    string // request, manager, bulk
	model   string
	arrival int
	ended   bool
	granted bool
	known   []string // bulk: IDs registered at submission
	unknown []string
	cfg     *Config // manager: OpApply's config
	op      Op      // manager: its operation
	seenBy  int     // step of the terminal or grant effect
	// register: an apply that registers its model (unregistered when
	// submitted), whose Done leaves the config's BaseVersion (at least 1)
	// committed and, for RegisterOnly, the model unloaded and not wanted
	// loaded (CONTRACT.md persist.restore).
	register bool
	// tomb is the version the model's tombstone kept when a registration
	// was submitted (0: never registered): the registration commits past
	// it (CONTRACT.md unreg.re-register).
	tomb uint64
}

type workload struct {
	c       chooser
	m       *Machine
	now     int64
	step    int
	jobs    []Effect
	running []Ticket
	ended   []Ticket // released requests
	live    []Ticket // submitted, not ended, not granted
	obs     map[Ticket]*observed
	reg     map[string]bool
	tombs   map[string]uint64 // unregistered models' last versions
	records []Record
	shut    bool
	pub     map[Handle]bool // published pools, from Publish to Retire
	// cur is the event observe checks the effects of (nil for a refused
	// call), and job the start effect of the job it completes; before is
	// every model's view before it.
	cur    *Event
	job    Effect
	before []ModelView
	fails  []int // every model's LoadFailures before it
	sent   bool  // ShutdownComplete seen
}

func newWorkload(c chooser, opts Options) (*workload, error) {
	m, err := New(opts)
	if err != nil {
		return nil, err
	}
	return &workload{c: c, m: m, obs: map[Ticket]*observed{}, reg: map[string]bool{}, tombs: map[string]uint64{},
		pub: map[Handle]bool{}}, nil
}

func (w *workload) pick(label string, n int) int { return w.c.intn(label, n) }

var wlConfigs = []*Config{
	{Engine: "fx", Options: "{}", Slots: 1, MemoryMB: 100, AdmissionTimeout: NoTimeout},
	{Engine: "fx", Options: "{}", Slots: 2, MemoryMB: 100, AdmissionTimeout: 3000},
	{Engine: "fx", Options: `{"v":2}`, Slots: 3, MemoryMB: 150},
	{Engine: "fx", Options: "{}", Slots: 2, MemoryMB: 100, MaxQueue: 2},
	{Engine: "fx", Options: `{"v":3}`, Slots: 5, MemoryMB: 100},
	// Exactly at every bound of Config.Validate: valid. Sessions of their
	// own, so no live capacity refuses it at once (that is invalid_request
	// too, CONTRACT.md fail.unsupported-capacity).
	{Engine: "fx", Options: `{"v":16}`, Slots: MaxSlots, MemoryMB: 0, MaxQueue: MaxQueueLimit, AdmissionTimeout: MaxTimeout},
	// And at the upper memory bound, the one the first edge cannot hold.
	{Engine: "fx", Options: `{"v":17}`, Slots: 1, MemoryMB: MaxMemoryMB},
	// Just past one bound each: invalid (wlInvalid).
	{Engine: "fx", Options: "{}", Slots: MaxSlots + 1, MemoryMB: 100},
	{Engine: "fx", Options: "{}", Slots: 2, MemoryMB: 100, MaxQueue: MaxQueueLimit + 1},
	{Engine: "fx", Options: "{}", Slots: 2, MemoryMB: -1},
	// Valid again: the same slots, memory and options as wlConfigs[1] but
	// other sessions, each by one session field (refSameSessions).
	{Engine: "fy", Options: "{}", Slots: 2, MemoryMB: 100},
	{Engine: "fx", Checkpoint: "v2", Options: "{}", Slots: 2, MemoryMB: 100},
	{Task: "asr", Engine: "fx", Options: "{}", Slots: 2, MemoryMB: 100},
	// A registration restored from the persistent registry (CONTRACT.md
	// persist.restore): unloaded at its saved version; a reconfigure
	// ignores both fields.
	{Engine: "fx", Options: "{}", Slots: 2, MemoryMB: 100, BaseVersion: 5, RegisterOnly: true},
	{Engine: "fx", Options: `{"v":2}`, Slots: 3, MemoryMB: 150, BaseVersion: 9},
	{Engine: "fx", Options: "{}", Slots: 1, MemoryMB: 100, RegisterOnly: true},
}

// edgeTimes are the future instants at which a comparison of core's flips:
// a slot holder becomes overdue for one of the timeouts the event mix
// uses (CONTRACT.md time.overdue-blockers), or a model's idle time runs
// out. A random step almost never lands on one exactly.
func (w *workload) edgeTimes() []int64 {
	var out []int64
	add := func(t int64) {
		if t > w.now {
			out = append(out, t)
		}
	}
	idle := w.m.Options().IdleTimeout
	for h := 0; h < w.m.Len(); h++ {
		v := w.m.Inspect(Handle(h))
		for _, s := range v.Slots {
			for _, d := range []int64{2000, 3000, 8000} {
				add(s.Since + d)
			}
		}
		if idle > 0 && v.State == Ready && v.Active == 0 {
			add(v.LastUsed + idle)
		}
	}
	return out
}

// refSameSessions is the reference's own test of whether two configs build
// identical sessions: they agree in everything but the fields that only
// schedule (slots, memory, admission timeout, queue limit) and the
// registration-only ones. It is written apart from core's sameSessions so
// that a mutant there is not copied into the reference.
func refSameSessions(a, b *Config) bool {
	x, y := *a, *b
	for _, c := range []*Config{&x, &y} {
		c.Slots, c.MemoryMB, c.AdmissionTimeout, c.MaxQueue, c.BaseVersion, c.RegisterOnly = 0, 0, 0, 0, 0, false
	}
	return x == y
}

// wlInvalid says, by construction and not by asking Config.Validate, which
// of wlConfigs a manager must be refused for at once (invalid_request,
// CONTRACT.md fail.spec-bounds).
var wlInvalid = map[*Config]bool{wlConfigs[7]: true, wlConfigs[8]: true, wlConfigs[9]: true}

// act performs one random event and checks the result.
func (w *workload) act() error {
	w.step++
	if edges := w.edgeTimes(); len(edges) > 0 && w.pick("edge", 4) == 0 {
		w.now = edges[w.pick("which", len(edges))]
	} else {
		w.now += int64(1 + w.pick("dt", 3000))
	}
	var ev Event
	ev.Now = w.now
	switch k := w.pick("action", 100); {
	case k < 28:
		ev.Kind, ev.Model = EvSubmitRequest, wlModels[w.pick("model", 3)]
		ev.Timeout = []int64{NoTimeout, 0, 2000, 8000}[w.pick("timeout", 4)]
	case k < 40:
		ev.Kind, ev.Model = EvSubmitManager, wlModels[w.pick("model", 3)]
		ev.Op = []Op{OpApply, OpApply, OpLoad, OpUnload, OpUnregister}[w.pick("op", 5)]
		if ev.Op == OpApply {
			ev.Config = wlConfigs[w.pick("config", len(wlConfigs))]
		}
		ev.Timeout = []int64{NoTimeout, 4000}[w.pick("mtimeout", 2)]
	case k < 44:
		ev.Kind = EvSubmitBulkUnload
		for _, id := range []string{"a", "b", "c", "zz"} {
			if w.pick("member", 2) == 1 {
				ev.Models = append(ev.Models, id)
			}
		}
	case k < 52:
		if w.pick("forged", 12) == 0 {
			// A shell bug: a ticket the machine never issued (its
			// generation is never reached) at any slot index, the slab's
			// end and beyond included, is unknown to Cancel and Release.
			tk := Ticket(uint64(0xFFFFFFFF)<<32 | uint64(w.pick("findex", 256)))
			if _, err := w.m.Cancel(w.now, tk, ReasonDisconnect); !errors.Is(err, ErrUnknownTicket) {
				return fmt.Errorf("step %d: Cancel of a forged ticket %#x: %v", w.step, uint64(tk), err)
			}
			if err := w.m.Release(w.now, tk, false); !errors.Is(err, ErrUnknownTicket) {
				return fmt.Errorf("step %d: Release of a forged ticket %#x: %v", w.step, uint64(tk), err)
			}
			// And a job of a model at or past the last registered one:
			// stale for every kind of completion, and nothing emitted.
			j := Job(uint64(w.m.Len()+w.pick("fmodel", 2))<<32 | 1)
			for _, err := range []error{w.m.LoadDone(w.now, j, 1, false), w.m.CloneDone(w.now, j, false),
				w.m.ProbeDone(w.now, j, 1, false), w.m.TeardownDone(w.now, j)} {
				if !errors.Is(err, ErrStaleJob) {
					return fmt.Errorf("step %d: completion of a forged job %#x: %v", w.step, uint64(j), err)
				}
			}
			if w.pick("fhandle", 2) == 0 {
				// A request by a handle one past the last: refused as for
				// an unknown ID (which is how the trace records it).
				tk := w.m.SubmitRequest(w.now, Handle(w.m.Len()), NoTimeout)
				if effs := w.m.Effects(); len(effs) != 1 || effs[0].Kind != EfReject || effs[0].Ticket != tk ||
					(effs[0].Code != CodeNotFound && !w.shut) {
					return fmt.Errorf("step %d: request for handle %d of %d models: %+v", w.step, w.m.Len(), w.m.Len(), effs)
				}
				ev := Event{Kind: EvSubmitRequest, Now: w.now, Model: "zz", Timeout: NoTimeout}
				w.records = append(w.records, EventRecord(ev, tk))
				w.obs[tk] = &observed{kind: "request", model: ev.Model, arrival: w.step}
				w.live = append(w.live, tk)
				w.cur = &ev
				defer func() { w.cur = nil }()
			}
			return w.observe()
		}
		if len(w.live) == 0 {
			return nil
		}
		ev.Kind, ev.Ticket = EvCancel, w.live[w.pick("cancel", len(w.live))]
		ev.Reason = []Reason{ReasonTimeout, ReasonDisconnect}[w.pick("reason", 2)]
	case k < 70:
		if len(w.running) == 0 || w.pick("stale", 20) == 0 {
			if len(w.ended) == 0 {
				return nil
			}
			// A shell bug: the same lease released twice must be refused.
			tk := w.ended[w.pick("again", len(w.ended))]
			if err := w.m.Release(w.now, tk, false); err == nil {
				return fmt.Errorf("step %d: a second Release of ticket %d was accepted", w.step, tk)
			}
			return w.observe()
		}
		ev.Kind, ev.Ticket, ev.Failed = EvRelease, w.running[w.pick("release", len(w.running))], w.pick("ifail", 5) == 0
	case k < 96:
		if len(w.jobs) == 0 {
			return nil
		}
		e := w.jobs[w.pick("job", len(w.jobs))]
		ev.Job = e.Job
		ev.Failed = w.pick("bfail", 6) == 0
		ev.Capacity = []int{4, 4, 2, 1, 3, 5}[w.pick("cap", 6)] // 3 and 5: exactly the slots of the probed configs
		ev.Kind = completion[e.Kind]
	case k < 99:
		ev.Kind = EvTick
		// Half the ticks come exactly at the next deadline, as the
		// runtime's timer fires them: the edges of every timeout, idle
		// retirement and backoff end.
		if nd := w.m.NextDeadline(); nd > w.now && w.pick("exact", 2) == 0 {
			w.now = nd
			ev.Now = nd
		}
	default:
		ev.Kind = EvBeginShutdown
	}
	return w.apply(ev)
}

func (w *workload) apply(ev Event) error {
	// Reference model: what is registered when this event is applied.
	var known, unknown []string
	if ev.Kind == EvSubmitBulkUnload {
		seen := map[string]bool{}
		for _, id := range ev.Models {
			if seen[id] {
				continue
			}
			seen[id] = true
			if w.reg[id] {
				known = append(known, id)
			} else {
				unknown = append(unknown, id)
			}
		}
	}
	// What the model's live pool allows before the event: an apply that
	// keeps its sessions but wants more slots than the pool's capacity is
	// the one valid config refused as invalid in its submitting step
	// (CONTRACT.md fail.unsupported-capacity).
	var capRefusable bool
	if ev.Kind == EvSubmitManager && ev.Op == OpApply {
		if h, ok := w.m.Lookup(ev.Model); ok {
			v := w.m.Inspect(h)
			capRefusable = v.Published && refSameSessions(ev.Config, v.Config) && ev.Config.Slots > 1 && ev.Config.Slots > v.Capacity
		}
	}
	var arrival *arrivalRef
	if ev.Kind == EvSubmitRequest && !w.shut {
		if h, ok := w.m.Lookup(ev.Model); ok {
			arrival = w.predictArrival(w.m.Inspect(h), ev)
		}
	}
	var mgrDeadline int64 = -1 // a queued manager's deadline, known before it is submitted
	if ev.Kind == EvSubmitManager && !w.shut && !wlInvalid[ev.Config] && ev.Op != OpNone {
		mgrDeadline = 0 // a registration waits unbounded
		if h, ok := w.m.Lookup(ev.Model); ok {
			if d := w.timeout(w.m.Inspect(h).Config, ev.Timeout); d > 0 {
				mgrDeadline = ev.Now + d
			}
		}
	}
	timers := w.timersBefore(ev)
	models := make([]ModelView, w.m.Len())
	w.fails = w.fails[:0]
	statuses := make([]ModelStatus, len(models))
	for h := range models {
		models[h] = w.m.Inspect(Handle(h))
		statuses[h] = w.m.Status(Handle(h))
		w.fails = append(w.fails, statuses[h].LoadFailures)
	}
	w.cur, w.job, w.before = &ev, Effect{}, models
	defer func() { w.cur, w.before = nil, nil }()
	for _, e := range w.jobs {
		if e.Job == ev.Job && ev.Job != 0 {
			w.job = e
		}
	}
	tk, err := w.m.Step(ev)
	if err != nil {
		return fmt.Errorf("step %d %s: %w", w.step, ev.Kind, err)
	}
	w.records = append(w.records, EventRecord(ev, tk))
	if err := w.checkTouched(ev, statuses); err != nil {
		return err
	}
	switch ev.Kind {
	case EvSubmitRequest, EvSubmitManager, EvSubmitBulkUnload:
		kind := map[EventKind]string{EvSubmitRequest: "request", EvSubmitManager: "manager", EvSubmitBulkUnload: "bulk"}[ev.Kind]
		w.obs[tk] = &observed{kind: kind, model: ev.Model, arrival: w.step, known: known, unknown: unknown, cfg: ev.Config, op: ev.Op,
			register: ev.Kind == EvSubmitManager && ev.Op == OpApply && !w.reg[ev.Model], tomb: w.tombs[ev.Model]}
		w.live = append(w.live, tk)
		if arrival != nil {
			if err := w.checkArrival(arrival, tk); err != nil {
				return err
			}
		}
		if mgrDeadline >= 0 {
			if d := w.m.Deadline(tk); d != 0 && d != mgrDeadline {
				return fmt.Errorf("step %d: queued manager's deadline %d, want %d", w.step, d, mgrDeadline)
			} else if d == 0 && mgrDeadline > 0 && w.queued(tk) {
				return fmt.Errorf("step %d: queued manager has no deadline, want %d", w.step, mgrDeadline)
			}
		}
		if ev.Kind == EvSubmitManager && ev.Op == OpApply && !w.shut {
			invalid := false
			for _, e := range w.m.Effects() {
				invalid = invalid || e.Kind == EfReject && e.Ticket == tk && e.Code == CodeInvalid
			}
			// A config past a bound is refused at once; a valid one only
			// when the live pool's capacity cannot take its slots (the
			// edge configs never: their sessions are their own).
			if wlInvalid[ev.Config] && !invalid || invalid && !wlInvalid[ev.Config] && !capRefusable {
				return fmt.Errorf("step %d: apply of %+v refused as invalid: %v, want %v", w.step, *ev.Config, invalid, wlInvalid[ev.Config])
			}
			if !invalid {
				w.reg[ev.Model] = true
			}
		}
	case EvTick, EvCancel:
		if err := w.checkTimers(ev, timers); err != nil {
			return err
		}
		if err := w.checkTick(ev, models); err != nil {
			return err
		}
	case EvRelease:
		w.running = slices.DeleteFunc(w.running, func(x Ticket) bool { return x == ev.Ticket })
		w.ended = append(w.ended, ev.Ticket)
	case EvLoadDone, EvCloneDone, EvProbeDone, EvTeardownDone:
		w.jobs = slices.DeleteFunc(w.jobs, func(e Effect) bool { return e.Job == ev.Job })
	case EvBeginShutdown:
		w.shut = true
	}
	return w.observe()
}

// observe checks the effects of the last event against the reference model.
func (w *workload) observe() error {
	effs := append([]Effect(nil), w.m.Effects()...)
	for _, e := range effs {
		w.records = append(w.records, w.m.EffectRecord(w.now, e))
	}
	inv := w.m.CheckInvariants()
	w.m.Advance()
	if inv != nil {
		return fmt.Errorf("step %d: %w", w.step, inv)
	}
	if err := w.checkReasons(effs); err != nil {
		return err
	}
	for _, e := range effs {
		// Pools as the effects say, in order: a Publish of a complete pool
		// (every committed slot) that is not published yet, a Retire and a
		// Grant only while published, no teardown of a serving pool.
		switch {
		case e.Kind == EfPublish && (w.pub[e.Model] || int(e.Sessions) != w.m.Config(e.Model).Slots):
			return fmt.Errorf("step %d: Publish of %d sessions of %s (slots %d, published %v)", w.step, e.Sessions,
				w.m.ID(e.Model), w.m.Config(e.Model).Slots, w.pub[e.Model])
		case (e.Kind == EfRetire || e.Kind == EfGrant) && !w.pub[e.Model]:
			return fmt.Errorf("step %d: %s on %s, which has no published pool", w.step, e.Kind, w.m.ID(e.Model))
		case e.Kind == EfStartTeardown && w.pub[e.Model]:
			return fmt.Errorf("step %d: StartTeardown (%s) of %s's serving pool", w.step, e.Cause, w.m.ID(e.Model))
		}
		if e.Kind == EfPublish || e.Kind == EfRetire {
			w.pub[e.Model] = e.Kind == EfPublish
		}
		switch e.Kind {
		case EfStartLoad, EfStartClone, EfStartProbe, EfStartTeardown:
			w.jobs = append(w.jobs, e)
		case EfGrant, EfReject, EfDone:
			o := w.obs[e.Ticket]
			if o == nil || o.ended || o.granted {
				return fmt.Errorf("step %d: %s for a ticket that already ended or was granted", w.step, e.Kind)
			}
			o.seenBy = w.step
			// Only a request refused for a load backoff carries a retry
			// time, never longer than the cap (CONTRACT.md fail.load-backoff).
			if opts := w.m.Options(); e.RetryAfter != 0 && (e.Kind != EfReject || e.Code != CodeServerBusy ||
				o.kind != "request" || opts.LoadBackoff == 0 || e.RetryAfter < 0 ||
				e.RetryAfter > max(opts.LoadBackoff, opts.LoadBackoffMax)) {
				return fmt.Errorf("step %d: %s %s of a %s carries RetryAfter %d", w.step, e.Kind, e.Code, o.kind, e.RetryAfter)
			}
			w.live = slices.DeleteFunc(w.live, func(x Ticket) bool { return x == e.Ticket })
			if e.Kind == EfGrant {
				o.granted = true
				w.running = append(w.running, e.Ticket)
			} else {
				o.ended = true
			}
			if e.Bulk != nil && (fmt.Sprint(e.Bulk.Unloaded) != fmt.Sprint(o.known) || fmt.Sprint(e.Bulk.NotFound) != fmt.Sprint(o.unknown)) {
				return fmt.Errorf("step %d: bulk answered %v/%v, registry had %v/%v", w.step, e.Bulk.Unloaded, e.Bulk.NotFound, o.known, o.unknown)
			}
		}
	}
	// FIFO and no barging, as clients see them: once a request is granted,
	// no earlier ticket of its model is still waiting.
	for _, e := range effs {
		if e.Kind != EfGrant {
			continue
		}
		g := w.obs[e.Ticket]
		for _, tk := range w.live {
			o := w.obs[tk]
			if o.model == g.model && o.kind != "bulk" && o.arrival < g.arrival {
				return fmt.Errorf("step %d: %s granted while earlier %s #%d waits", w.step, g.model, o.kind, o.arrival)
			}
		}
		if h, ok := w.m.Lookup(g.model); ok && w.m.Status(h).ConfigVersion != e.Version {
			return fmt.Errorf("step %d: grant bound to v%d, committed v%d", w.step, e.Version, w.m.Status(h).ConfigVersion)
		}
	}
	if err := w.checkVictims(effs, w.before); err != nil {
		return err
	}
	if err := w.checkBackoff(w.before); err != nil {
		return err
	}
	if err := w.checkColdGuard(); err != nil {
		return err
	}
	if err := w.checkManagers(effs, w.before); err != nil {
		return err
	}
	if err := w.checkUnregister(effs); err != nil {
		return err
	}
	if err := w.checkShutdown(effs); err != nil {
		return err
	}
	return w.checkNextDeadline()
}

// checkColdGuard: with the cold-load guard on, at most one model builds
// its first pool at a time, from its load to its publication (CONTRACT.md
// res.cold-guard).
func (w *workload) checkColdGuard() error {
	if !w.m.Options().SerializeColdLoads {
		return nil
	}
	var building []string
	for h := range w.m.Len() {
		if v := w.m.Inspect(Handle(h)); v.State == Loading && (v.JobKind == "load" || v.JobKind == "clone") {
			building = append(building, v.ID)
		}
	}
	if len(building) > 1 {
		return fmt.Errorf("step %d: the cold-load guard lets %v build at once", w.step, building)
	}
	return nil
}

// checkNextDeadline: NextDeadline is the earliest time a Tick has work: a
// queued ticket's deadline, the end of an idle model's --idle-timeout, the
// end of a load backoff (0: none).
func (w *workload) checkNextDeadline() error {
	var want int64
	take := func(t int64) {
		if t > 0 && (want == 0 || t < want) {
			want = t
		}
	}
	idle := w.m.Options().IdleTimeout
	for h := range w.m.Len() {
		v := w.m.Inspect(Handle(h))
		for _, q := range v.Queue {
			take(q.Deadline)
		}
		if idle > 0 && !w.m.ShuttingDown() && idleView(v) {
			take(v.LastUsed + idle)
		}
		take(v.BackoffUntil)
	}
	if got := w.m.NextDeadline(); got != want {
		return fmt.Errorf("step %d: NextDeadline %d, want %d", w.step, got, want)
	}
	return nil
}

// checkReasons checks why tickets were rejected against the event that
// rejected them: load_failed only from a job that failed (or reported too
// small a capacity) or the teardown after it, and a probe's outcome for the
// manager that asked for it (CONTRACT.md fail.capacity-probe): a failed
// probe is internal_error and too small a capacity invalid_request, both
// load_failed; a probe that fits answers the manager only when residency
// refuses the replacement's load at once (no_room).
func (w *workload) checkReasons(effs []Effect) error {
	ev := w.cur
	if ev == nil {
		if len(effs) > 0 {
			return fmt.Errorf("step %d: a refused call emitted %d effects", w.step, len(effs))
		}
		return nil
	}
	// The probing manager: the earliest manager of the probed model that
	// has not ended (managers are granted one at a time, in arrival order).
	var mgr Ticket
	var mcfg *Config
	if ev.Kind == EvProbeDone {
		first := 0
		for tk, o := range w.obs {
			if o.kind == "manager" && !o.ended && o.model == w.m.ID(w.job.Model) && (mcfg == nil || o.arrival < first) {
				mgr, mcfg, first = tk, o.cfg, o.arrival
			}
		}
		if mcfg == nil {
			return fmt.Errorf("step %d: ProbeDone on %s, which has no granted reconfigure", w.step, w.m.ID(w.job.Model))
		}
	}
	small := false // the completed load or probe reported too small a capacity
	switch ev.Kind {
	case EvLoadDone:
		small = ev.Capacity < w.m.Config(w.job.Model).Slots
	case EvProbeDone:
		small = ev.Capacity < mcfg.Slots
	}
	answered := false
	for _, e := range effs {
		if e.Kind == EfReject && e.Reason == RejectLoadFailed {
			ok := false
			switch ev.Kind {
			case EvLoadDone, EvProbeDone:
				ok = ev.Failed || small
			case EvCloneDone:
				ok = ev.Failed
			case EvTeardownDone:
				ok = true // the private sessions of a failed build are gone
			}
			if !ok {
				return fmt.Errorf("step %d: %s (failed=%v capacity=%d) rejected ticket %d for load_failed",
					w.step, ev.Kind, ev.Failed, ev.Capacity, e.Ticket)
			}
		}
		if mgr == 0 || e.Ticket != mgr || (e.Kind != EfReject && e.Kind != EfDone) {
			continue
		}
		answered = true
		want := CodeBackend
		if !ev.Failed {
			want = CodeInvalid
		}
		if !ev.Failed && !small {
			// The replacement loads at once when nothing was published,
			// and residency may refuse that load.
			if e.Kind != EfReject || e.Code != CodeServerBusy || e.Reason != RejectNoRoom {
				return fmt.Errorf("step %d: a probe of capacity %d for slots %d answered its manager %s %s %q", w.step,
					ev.Capacity, mcfg.Slots, e.Kind, e.Code, e.Reason)
			}
			continue
		}
		if e.Kind != EfReject || e.Code != want || e.Reason != RejectLoadFailed {
			return fmt.Errorf("step %d: a probe (failed=%v capacity=%d slots=%d) answered its manager %s %s %q, want Reject %s load_failed",
				w.step, ev.Failed, ev.Capacity, mcfg.Slots, e.Kind, e.Code, e.Reason, want)
		}
	}
	if mgr != 0 && (ev.Failed || small) && !answered {
		return fmt.Errorf("step %d: a probe (failed=%v capacity=%d slots=%d) left its manager unanswered", w.step,
			ev.Failed, ev.Capacity, mcfg.Slots)
	}
	return nil
}

// finish drains: every job succeeds, every lease is released, until nothing
// is left; then every ticket must have ended and nothing may be held.
func (w *workload) finish() error {
	if err := w.drain(); err != nil {
		return err
	}
	// A far tick expires the bounded waiters and retires idle models; drain
	// what that started. Everything else must have been served.
	if err := w.apply(Event{Kind: EvTick, Now: w.now + 1e12}); err != nil {
		return err
	}
	w.now += 1e12
	if err := w.drain(); err != nil {
		return err
	}
	if len(w.live) > 0 || len(w.jobs) > 0 || len(w.running) > 0 {
		return fmt.Errorf("quiescent with %d waiting tickets: %s", len(w.live), w.m.Describe())
	}
	if w.m.LiveTickets() != 0 || w.m.JobsInFlight() != 0 {
		return fmt.Errorf("quiescent but the machine holds %d tickets, %d jobs", w.m.LiveTickets(), w.m.JobsInFlight())
	}
	for h := 0; h < w.m.Len(); h++ {
		if st := w.m.Status(Handle(h)); st.ActiveSlots != 0 || st.QueuedRequests != 0 || st.QueuedManagers != 0 {
			return fmt.Errorf("quiescent but %+v", st)
		}
	}
	return nil
}

// drain completes every job successfully and releases every lease until
// none is left.
func (w *workload) drain() error {
	for n := 0; len(w.jobs) > 0 || len(w.running) > 0; n++ {
		if n > 100000 {
			return errors.New("drain does not converge")
		}
		w.now++
		var ev Event
		if len(w.jobs) > 0 {
			e := w.jobs[0]
			ev = Event{Now: w.now, Job: e.Job, Capacity: 4}
			ev.Kind = completion[e.Kind]
		} else {
			ev = Event{Kind: EvRelease, Now: w.now, Ticket: w.running[0]}
		}
		if err := w.apply(ev); err != nil {
			return err
		}
	}
	return nil
}

// replay feeds the recorded events through Step on a fresh machine (after a
// JSON round trip) and compares the final state: the trace format carries
// everything the machine needs.
func (w *workload) replay(opts Options) error {
	m, err := New(opts)
	if err != nil {
		return err
	}
	for _, r := range w.records {
		if r.Ev == "" {
			continue
		}
		line, err := MarshalRecord(r)
		if err != nil {
			return err
		}
		var back Record
		if err := jsonUnmarshal(line, &back); err != nil {
			return err
		}
		ev, err := back.Event()
		if err != nil {
			return err
		}
		tk, err := m.Step(ev)
		if err != nil {
			return fmt.Errorf("replay %s: %w", r.Ev, err)
		}
		if r.Ticket != 0 && (ev.Kind == EvSubmitRequest || ev.Kind == EvSubmitManager || ev.Kind == EvSubmitBulkUnload) && uint64(tk) != r.Ticket {
			return fmt.Errorf("replay assigned ticket %d, trace has %d", tk, r.Ticket)
		}
		m.Advance()
	}
	if a, b := string(m.AppendKey(nil)), string(w.m.AppendKey(nil)); a != b || m.Describe() != w.m.Describe() {
		return fmt.Errorf("replay diverged:\n%s\nvs\n%s", m.Describe(), w.m.Describe())
	}
	return nil
}

// runWorkload runs steps random events, then drains and checks quiescence.
func runWorkload(c chooser, opts Options, steps int) (*workload, error) {
	w, err := newWorkload(c, opts)
	if err != nil {
		return nil, err
	}
	if c.intn("warm", 2) == 0 {
		if err := w.warm(); err != nil {
			return w, err
		}
	}
	for i := 0; i < steps; i++ {
		if err := w.act(); err != nil {
			return w, err
		}
	}
	return w, w.finish()
}

// warm starts half the workloads with every model registered and its
// backend steps done, so that residency limits bind from the first step
// (evictions, the victim choice, loads waiting for teardowns) instead of
// only in the few runs that register all three models by chance.
func (w *workload) warm() error {
	// One instant for the whole prefix: the pools are published at the
	// same time, so the victim choice meets its tie (the first registered).
	w.now++
	for _, id := range wlModels {
		if err := w.apply(Event{Kind: EvSubmitManager, Now: w.now, Model: id, Op: OpApply, Config: wlConfigs[0], Timeout: NoTimeout}); err != nil {
			return err
		}
		for n := 0; len(w.jobs) > 0 && n < 16; n++ {
			e := w.jobs[0]
			ev := Event{Kind: completion[e.Kind], Now: w.now, Job: e.Job, Capacity: 1}
			if err := w.apply(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// arrivalRef is the reference's own prediction of a request's submission
// (CONTRACT.md order.request-then-request, time.queue-limit,
// time.overdue-blockers, time.timeout-precedence), from the model's view
// before it: admitted at once, refused server_busy at once (queue limit,
// every occupied slot overdue), or queued with its deadline.
type arrivalRef struct {
	now      int64
	admitted bool  // decision (2): a slot at once
	cold     bool  // and its model is unloaded: the load a slot starts may be refused (backoff, no room)
	refused  bool  // decisions (3) and (4)
	deadline int64 // decision (5): the queued request's deadline, 0 for none
}

func (w *workload) predictArrival(v ModelView, ev Event) *arrivalRef {
	a := &arrivalRef{now: ev.Now}
	loadable := v.State == Ready || v.State == Unloaded || v.State == Loading && v.Manager == nil
	if len(v.Queue) == 0 && v.Manager == nil && loadable && v.Active < v.Config.Slots {
		a.admitted, a.cold = true, v.State == Unloaded
		return a
	}
	queued := 0
	for _, q := range v.Queue {
		if q.Kind == "request" {
			queued++
		}
	}
	if v.Config.MaxQueue > 0 && queued >= v.Config.MaxQueue {
		a.refused = true
		return a
	}
	// The timeout: the request's own, else the model's, else the server's
	// default (NoTimeout falls through, 0 is unbounded); the ceiling bounds
	// every one of them, unbounded included.
	d := w.timeout(v.Config, ev.Timeout)
	if d > 0 && len(v.Slots) > 0 {
		overdue := true
		for _, sl := range v.Slots {
			overdue = overdue && ev.Now-sl.Since >= d
		}
		if overdue {
			a.refused = true
			return a
		}
	}
	if d > 0 {
		a.deadline = ev.Now + d
		if a.deadline < ev.Now { // saturated, never wrapped
			a.deadline = math.MaxInt64
		}
	}
	return a
}

func (w *workload) checkArrival(a *arrivalRef, tk Ticket) error {
	var own []Effect
	for _, e := range w.m.Effects() {
		if e.Ticket == tk {
			own = append(own, e)
		}
	}
	refused := len(own) == 1 && own[0].Kind == EfReject && own[0].Code == CodeServerBusy && own[0].Reason == RejectOnArrival
	switch {
	case a.admitted:
		if refused && !a.cold {
			return fmt.Errorf("step %d: a request with a free slot was refused on arrival", w.step)
		}
	case a.refused:
		if !refused {
			return fmt.Errorf("step %d: a request the queue limit or overdue slots refuse got %v", w.step, own)
		}
	default:
		if len(own) != 0 {
			return fmt.Errorf("step %d: a request that should queue got %v", w.step, own)
		}
		if d := w.m.Deadline(tk); d != a.deadline {
			return fmt.Errorf("step %d: queued request's deadline %d, want %d (now %d)", w.step, d, a.deadline, a.now)
		}
	}
	return nil
}

// timerRef is what the reference knows of a live ticket before a Tick or a
// Cancel: where it stands and its deadline.
type timerRef struct {
	queued, waiting bool // in its model's queue; admitted, waiting for the pool
	dead            int64
}

func (w *workload) timersBefore(ev Event) map[Ticket]timerRef {
	if ev.Kind != EvTick && ev.Kind != EvCancel {
		return nil
	}
	out := map[Ticket]timerRef{}
	for h := range w.m.Len() {
		v := w.m.Inspect(Handle(h))
		for _, q := range v.Queue {
			if !q.Member {
				out[q.Ticket] = timerRef{queued: true, dead: q.Deadline}
			}
		}
		for _, sl := range v.Slots {
			if sl.Phase == "wait_init" {
				out[sl.Ticket] = timerRef{waiting: true}
			}
		}
	}
	return out
}

// checkTimers: a Tick refuses server_busy (timeout) exactly the queued
// tickets whose deadline has come, and nothing else; a Cancel ends a queued
// ticket at once (timeout: server_busy, disconnect: cancelled), and an
// admitted request waiting for its pool only on disconnect (CONTRACT.md
// time.admission-timeout, time.disconnect-queued,
// time.disconnect-waiting-init).
func (w *workload) checkTimers(ev Event, before map[Ticket]timerRef) error {
	ended := map[Ticket]Effect{}
	for _, e := range w.m.Effects() {
		if e.Kind == EfReject || e.Kind == EfDone {
			ended[e.Ticket] = e
		}
	}
	if ev.Kind == EvTick {
		for tk, r := range before {
			e, ok := ended[tk]
			due := r.queued && r.dead > 0 && r.dead <= ev.Now
			timedOut := ok && e.Kind == EfReject && e.Code == CodeServerBusy && e.Reason == RejectTimeout
			if due != timedOut {
				return fmt.Errorf("step %d: Tick at %d: ticket deadline %d (queued %v) timed out %v (%+v)", w.step, ev.Now, r.dead, r.queued, timedOut, e)
			}
		}
		return nil
	}
	r, known := before[ev.Ticket]
	e, ok := ended[ev.Ticket]
	if o := w.obs[ev.Ticket]; o != nil && o.kind == "bulk" && !o.ended {
		return w.checkBulkCancel(ev)
	}
	switch {
	case !known: // a ticket already granted or ended: not this check's
	case r.queued:
		want, why := CodeCancelled, RejectDisconnect
		if ev.Reason == ReasonTimeout {
			want, why = CodeServerBusy, RejectTimeout
		}
		if !ok || e.Kind != EfReject || e.Code != want || e.Reason != why {
			return fmt.Errorf("step %d: Cancel (%v) of a queued ticket answered %+v, want %s %s", w.step, ev.Reason, e, want, why)
		}
	case r.waiting:
		if ended := ok && e.Kind == EfReject && e.Code == CodeCancelled; ended != (ev.Reason == ReasonDisconnect) {
			return fmt.Errorf("step %d: Cancel (%v) of a request waiting for its pool answered %+v", w.step, ev.Reason, e)
		}
	}
	return nil
}

// checkBulkCancel: a bulk unload's wait is unbounded, so a timeout's
// Cancel changes nothing; a disconnect's takes its queued members out of
// every queue (CONTRACT.md time.zero-and-bulk, time.disconnect-queued).
func (w *workload) checkBulkCancel(ev Event) error {
	if ev.Reason != ReasonDisconnect {
		if effs := w.m.Effects(); len(effs) > 0 {
			return fmt.Errorf("step %d: a timeout's Cancel of a bulk emitted %v", w.step, effs)
		}
		return nil
	}
	if w.liveBulks() != 1 {
		return nil // whose members the queues hold, the views do not say
	}
	for h := range w.m.Len() {
		for _, q := range w.m.Inspect(Handle(h)).Queue {
			if q.Member {
				return fmt.Errorf("step %d: a disconnected bulk's member %d is still queued on %s", w.step, q.Ticket, w.m.ID(Handle(h)))
			}
		}
	}
	return nil
}

// liveBulks counts the bulk unloads submitted and not answered.
func (w *workload) liveBulks() int {
	n := 0
	for _, o := range w.obs {
		if o.kind == "bulk" && !o.ended {
			n++
		}
	}
	return n
}

// checkTick: a Tick retires exactly the idle models whose --idle-timeout has
// run out (CONTRACT.md res.idle-retirement) and ends exactly the backoffs
// that are over (fail.load-backoff).
func (w *workload) checkTick(ev Event, before []ModelView) error {
	if ev.Kind != EvTick {
		return nil
	}
	retired := map[Handle]bool{}
	for _, e := range w.m.Effects() {
		if e.Kind == EfRetire && e.Cause == CauseIdle {
			retired[e.Model] = true
		}
	}
	idle := w.m.Options().IdleTimeout
	for h, v := range before {
		due := idle > 0 && !w.shut && idleView(v) && ev.Now-v.LastUsed >= idle
		if due != retired[Handle(h)] {
			return fmt.Errorf("step %d: Tick at %d: %s idle since %d (timeout %d) retired %v, want %v", w.step, ev.Now, v.ID, v.LastUsed, idle, retired[Handle(h)], due)
		}
		if b := v.BackoffUntil; b != 0 {
			after := w.m.Status(Handle(h)).BackoffUntil
			if over := b <= ev.Now; over != (after == 0) {
				return fmt.Errorf("step %d: Tick at %d: %s's backoff until %d became %d", w.step, ev.Now, v.ID, b, after)
			}
		}
	}
	return nil
}

// checkBackoff: a load that failed in this step backs its model off for
// LoadBackoff doubled once per earlier consecutive failure, at most the cap
// (CONTRACT.md fail.load-backoff).
func (w *workload) checkBackoff(before []ModelView) error {
	opts := w.m.Options()
	for h, v := range before {
		if h >= len(w.fails) {
			break
		}
		st := w.m.Status(Handle(h))
		// Only a load that failed or came up short counts: never a refusal
		// for room (the config did load elsewhere or will).
		failed := w.cur != nil && (w.cur.Kind == EvLoadDone && (w.cur.Failed || w.cur.Capacity < w.m.Config(Handle(h)).Slots) ||
			w.cur.Kind == EvCloneDone && w.cur.Failed) && w.job.Model == Handle(h)
		if st.LoadFailures > w.fails[h] && !failed {
			return fmt.Errorf("step %d: %s's load failures rose to %d without a failed load (%v)", w.step, v.ID, st.LoadFailures, w.cur)
		}
		if st.LoadFailures != w.fails[h]+1 {
			continue
		}
		want := int64(0)
		if base := opts.LoadBackoff; base > 0 {
			ceil := max(opts.LoadBackoffMax, base)
			d := base
			for range st.LoadFailures - 1 {
				d = min(2*d, ceil)
			}
			want = w.cur.Now + d // a rise without w.cur was refused above
		}
		if st.BackoffUntil != want {
			return fmt.Errorf("step %d: %s's load failure %d backs off until %d, want %d", w.step, v.ID, st.LoadFailures, st.BackoffUntil, want)
		}
	}
	return nil
}

// checkVictims: an eviction takes the least recently used idle models first
// (ties: the first registered), so every idle model it left was used more
// recently than every one it took (CONTRACT.md res.victim-choice); and it
// takes no more than the load needs.
func (w *workload) checkVictims(effs []Effect, before []ModelView) error {
	victim := map[Handle]bool{}
	for _, e := range effs {
		if e.Kind == EfRetire && e.Cause == CauseEvict {
			victim[e.Model] = true
		}
	}
	// A cold request is refused for room only when its load would not fit
	// even with every pool that is tearing down gone and every idle model
	// evicted (CONTRACT.md res.limits, res.no-victim); with a count limit
	// only, one victim makes room for one load, so a submission evicts
	// exactly what its load needs.
	if opts := w.m.Options(); w.cur != nil && (w.cur.Kind == EvSubmitRequest || w.cur.Kind == EvSubmitManager) {
		staying, idles := 0, 0
		var stayingMB, idleMB int64
		var target *ModelView
		for k := range before {
			u := &before[k]
			if u.Resident && u.JobKind != "teardown" {
				staying++
				stayingMB += u.ResidentMB
			}
			if u.ID == w.cur.Model {
				target = u
			} else if idleView(*u) {
				idles++
				idleMB += u.ResidentMB
			}
		}
		n, b := opts.MaxLoadedModels, opts.MemoryBudgetMB
		if n > 0 && b == 0 && len(victim) > 0 && len(victim) != max(0, staying+1-n) {
			return fmt.Errorf("step %d: %d evicted for one load, %d resident staying, limit %d", w.step, len(victim), staying, n)
		}
		if target != nil && target.State == Unloaded && target.BackoffUntil == 0 && w.cur.Kind == EvSubmitRequest {
			mb := target.Config.MemoryMB
			fits := (n == 0 || staying-idles+1 <= n) && (b == 0 || stayingMB-idleMB+mb <= b)
			for _, e := range effs {
				if fits && e.Kind == EfReject && e.Model == target.Handle && e.Code == CodeServerBusy {
					return fmt.Errorf("step %d: a cold request for %s (%d MB) refused for room: %d staying (%d MB), %d idle (%d MB), limits %d/%d MB",
						w.step, target.ID, mb, staying, stayingMB, idles, idleMB, n, b)
				}
			}
		}
	}
	if len(victim) == 0 {
		return nil
	}
	earlier := func(a, b ModelView) bool {
		return a.LastUsed < b.LastUsed || a.LastUsed == b.LastUsed && a.Handle < b.Handle
	}
	for _, u := range before {
		if victim[u.Handle] || (w.cur != nil && u.ID == w.cur.Model) || !idleView(u) {
			continue
		}
		for v := range victim {
			if int(v) < len(before) && earlier(u, before[v]) {
				return fmt.Errorf("step %d: evicted %s (last used %d) before idle %s (last used %d)", w.step,
					before[v].ID, before[v].LastUsed, u.ID, u.LastUsed)
			}
		}
	}
	return nil
}

// timeout is the reference's admission timeout of a submission: its own,
// else the model's, else the server's default (NoTimeout falls through, 0 is
// unbounded); the ceiling bounds every one of them, unbounded included.
func (w *workload) timeout(c *Config, own int64) int64 {
	opts := w.m.Options()
	d := own
	for _, next := range []int64{c.AdmissionTimeout, opts.DefaultAdmissionTimeout} {
		if d == NoTimeout {
			d = next
		}
	}
	if d == NoTimeout {
		d = 0
	}
	if c := opts.AdmissionCeiling; c > 0 && (d == 0 || c < d) {
		d = c
	}
	return d
}

func (w *workload) queued(tk Ticket) bool {
	for h := range w.m.Len() {
		for _, q := range w.m.Inspect(Handle(h)).Queue {
			if q.Ticket == tk {
				return true
			}
		}
	}
	return false
}

// checkManagers: what a manager's answer leaves (CONTRACT.md
// ops.ready.reconfigure, persist.restore): a bulk's Done carries its
// result; a Done of a targeted manager leaves the model wanted loaded
// unless it unloaded; an apply's Done
// leaves its config committed; versions never go back, and a probe is for
// the next version of a multi-slot config that changes the sessions, slots
// or memory; an apply is refused invalid only past a bound, for too small
// a capacity reported in this step, or when the live pool cannot take its
// slots.
func (w *workload) checkManagers(effs []Effect, before []ModelView) error {
	doneOn := map[string]bool{}        // models a manager succeeded on in this step
	lastDone := map[string]*observed{} // and the last of them, whose result stands
	for _, e := range effs {
		if o := w.obs[e.Ticket]; e.Kind == EfDone && o != nil && o.kind == "manager" {
			doneOn[o.model] = true
			lastDone[o.model] = o
		}
	}
	for _, e := range effs {
		switch e.Kind {
		case EfStartProbe:
			// Nothing commits while a probe is pending, so the config the
			// step ends with is the one the probe would replace (an earlier
			// manager in the same step may have committed it).
			if int(e.Model) < len(before) {
				old, c := w.m.Config(e.Model), e.Config
				if c.Slots <= 1 || refSameSessions(c, &old) && c.Slots == old.Slots && c.MemoryMB == old.MemoryMB {
					return fmt.Errorf("step %d: probe of %+v over %+v", w.step, *c, old)
				}
				if e.Version != w.m.Status(e.Model).ConfigVersion+1 {
					return fmt.Errorf("step %d: probe for v%d, committed v%d", w.step, e.Version, w.m.Status(e.Model).ConfigVersion)
				}
			}
		case EfDone, EfReject:
			o := w.obs[e.Ticket]
			if o == nil || o.kind == "request" {
				continue
			}
			if o.kind == "bulk" {
				if e.Kind == EfDone && e.Bulk == nil {
					return fmt.Errorf("step %d: a bulk's Done without its result", w.step)
				}
				continue
			}
			// A targeted manager's Done carries its model's status (the
			// body of the HTTP answer).
			if e.Kind == EfDone && (e.Status == nil || e.Status.ID != o.model) {
				return fmt.Errorf("step %d: %s's %s Done carries status %+v", w.step, o.model, o.op, e.Status)
			}
			h, ok := w.m.Lookup(o.model)
			if !ok {
				continue
			}
			st := w.m.Status(h)
			if e.Kind == EfDone && lastDone[o.model] == o {
				restore := o.register && o.cfg.RegisterOnly
				if st.WantLoaded != (o.op != OpUnload && !restore) {
					return fmt.Errorf("step %d: %s's %s Done leaves want_loaded %v", w.step, o.model, o.op, st.WantLoaded)
				}
				if restore && (st.State != Unloaded || st.Loaded) {
					return fmt.Errorf("step %d: %s restored %s, want unloaded", w.step, o.model, st.State)
				}
				if o.register && st.ConfigVersion != max(o.cfg.BaseVersion, o.tomb+1) {
					return fmt.Errorf("step %d: %s registered at v%d, want v%d", w.step, o.model, st.ConfigVersion,
						max(o.cfg.BaseVersion, o.tomb+1))
				}
				if o.op == OpApply && !wlInvalid[o.cfg] {
					want := *o.cfg
					want.BaseVersion, want.RegisterOnly = 0, false
					if got := w.m.Config(h); got != want {
						return fmt.Errorf("step %d: %s's apply Done commits %+v, want %+v", w.step, o.model, got, want)
					}
				}
			} else if e.Kind == EfReject && int(h) < len(before) && o.op != OpNone {
				if e.Code == CodeInvalid && o.op == OpApply && !wlInvalid[o.cfg] && w.cur != nil &&
					w.cur.Kind != EvLoadDone && w.cur.Kind != EvProbeDone && w.cur.Kind != EvTeardownDone {
					// (a short load's answer waits for its private
					// sessions' teardown: reg.first-load-failure)
					v := before[h]
					if !(v.Published && refSameSessions(o.cfg, v.Config) && o.cfg.Slots > 1 && o.cfg.Slots > v.Capacity) {
						return fmt.Errorf("step %d: apply of %+v refused invalid on a pool of capacity %d (%+v)", w.step, *o.cfg, v.Capacity, *v.Config)
					}
				}
			}
		}
	}
	for h, v := range before {
		if st := w.m.Status(Handle(h)); st.ConfigVersion < v.Version {
			return fmt.Errorf("step %d: %s's version went back from %d to %d", w.step, v.ID, v.Version, st.ConfigVersion)
		}
	}
	return nil
}

// checkShutdown: ShutdownComplete comes once, exactly when the machine is
// shutting down and nothing is left: no ticket, no job, no resident pool,
// no loader (CONTRACT.md time.shutdown-deadline).
func (w *workload) checkShutdown(effs []Effect) error {
	sent := false
	for _, e := range effs {
		if e.Kind == EfShutdownComplete {
			if sent || w.sent {
				return fmt.Errorf("step %d: ShutdownComplete twice", w.step)
			}
			sent = true
		}
	}
	quiet := w.m.ShuttingDown() && w.m.LiveTickets() == 0 && w.m.JobsInFlight() == 0 && len(w.m.Loaders()) == 0
	for h := range w.m.Len() {
		quiet = quiet && !w.m.Inspect(Handle(h)).Resident
	}
	if sent && !quiet || quiet && !sent && !w.sent {
		return fmt.Errorf("step %d: ShutdownComplete %v, machine quiet %v", w.step, sent || w.sent, quiet)
	}
	w.sent = w.sent || sent
	return nil
}

// idleView is the reference's idle model, from its view: a published ready
// pool with no lease, no queue, no manager, no job and no loader place, the
// only kind idle retirement and eviction may take (CONTRACT.md
// res.idle-retirement, res.victim-choice).
func idleView(v ModelView) bool {
	return v.Published && v.State == Ready && v.Active == 0 && len(v.Queue) == 0 && v.Manager == nil &&
		v.JobKind == "none" && !v.InLoaders
}

// checkTouched: Touched names every model whose status the step changed,
// and every model it registered, so an observer that reads only those
// statuses misses no change (core/runtime's status feed does exactly that).
func (w *workload) checkTouched(ev Event, before []ModelStatus) error {
	touched := map[Handle]bool{}
	for _, h := range w.m.Touched() {
		if touched[h] {
			return fmt.Errorf("step %d %s: Touched names model %d twice", w.step, ev.Kind, h)
		}
		touched[h] = true
	}
	for h := 0; h < w.m.Len(); h++ {
		st := w.m.Status(Handle(h))
		if h < len(before) && st == before[h] || touched[Handle(h)] {
			continue
		}
		was := "unregistered"
		if h < len(before) {
			was = fmt.Sprintf("%+v", before[h])
		}
		return fmt.Errorf("step %d %s: model %s changed from %s to %+v, and Touched does not name it", w.step, ev.Kind, st.ID, was, st)
	}
	return nil
}

// checkUnregister: an unregister's Done leaves its model unregistered (its
// ID resolves to nothing, its tombstone keeps the version it had), and
// every request and targeted manager of that model submitted after the
// unregister and still waiting was answered not_found in the same step
// (CONTRACT.md unreg.barrier, unreg.404-after, unreg.tombstone). Nothing
// of the model waits afterwards until it registers again.
func (w *workload) checkUnregister(effs []Effect) error {
	answered := map[Ticket]Effect{}
	for _, e := range effs {
		if e.Kind == EfReject || e.Kind == EfDone || e.Kind == EfGrant {
			answered[e.Ticket] = e
		}
	}
	for _, e := range effs {
		o := w.obs[e.Ticket]
		if e.Kind != EfDone || o == nil || o.kind != "manager" || o.op != OpUnregister {
			continue
		}
		if _, ok := w.m.Lookup(o.model); ok {
			// A later registration in the same step is not possible: an
			// apply queued behind the unregister is answered not_found.
			return fmt.Errorf("step %d: %s still resolves after its unregister", w.step, o.model)
		}
		w.reg[o.model] = false
		for h := range w.m.Len() {
			if st := w.m.Status(Handle(h)); st.ID == o.model {
				if !st.Unregistered || st.Loaded || st.ActiveSlots != 0 || st.QueuedRequests != 0 || st.QueuedManagers != 0 {
					return fmt.Errorf("step %d: %s's tombstone is %+v", w.step, o.model, st)
				}
				w.tombs[o.model] = st.ConfigVersion
			}
		}
		for tk, x := range w.obs {
			if x.model != o.model || x.kind == "bulk" || x.arrival <= o.arrival || x.ended && answered[tk].Ticket != tk {
				continue
			}
			if a, ok := answered[tk]; !ok || a.Kind != EfReject || a.Code != CodeNotFound {
				return fmt.Errorf("step %d: %s %s #%d behind the unregister of %s answered %+v, want not_found",
					w.step, x.kind, x.op, x.arrival, o.model, a)
			}
		}
	}
	return nil
}
