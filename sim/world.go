package sim

import (
	"errors"

	"github.com/sluice-dev/sluice/core"
)

// client is what the simulated client of a ticket does.
type client struct {
	id      core.Ticket
	name    int32
	stream  bool
	gone    bool // the client went away
	counted bool // holds a place of its population (see clientEnded)
	chunks  int32
}

// Management clients are a small population too: an operator's tools do
// not keep unbounded numbers of operations in flight.
const (
	maxManagers = 8
	maxBulks    = 3
)

// nameState is the demand phase of one model ID's clients.
type nameState struct {
	on       bool
	known    bool // registered (entries are never erased)
	parked   bool // every client waits for an answer; no arrival is scheduled
	phaseEnd int64
	out      int // requests submitted and not ended
}

// recEv is one recorded core event, with what the minimizer needs to
// rename tickets and jobs when it replays a subset.
type recEv struct {
	ev core.Event
	tk core.Ticket // what a submission returned
	jm string      // model ID of a completion's job
}

// world is one simulated run: the machine, the oracle, the clients, the
// engines, the clock and the event heap. It is single-goroutine.
type world struct {
	opts *Options
	sc   scenario
	r    rng
	m    *core.Machine
	o    oracle
	now  int64
	q    eventHeap

	steps        int
	lastEv       int64 // time of the last core event
	stopped      bool  // the workload stopped; the run drains
	shutdownSent bool
	tickAt       int64

	cl       []client
	pending  client // attributes of the client about to submit
	names    []nameState
	mgrsOut  int // managers in flight
	bulksOut int // bulk unloads in flight

	st       stats
	touched  []core.Handle
	allHit   bool
	idleCand bool // a touched model is ready with nothing admitted or queued
	trace    *traceWriter
	rec      []recEv
	tl       *timelineRec
	fail     *Failure
}

func newWorld(opts *Options) (*world, error) {
	w := &world{opts: opts, r: newRNG(opts.Seed)}
	w.sc = newScenario(opts, w.r)
	m, err := core.New(w.sc.opts)
	if err != nil {
		return nil, err
	}
	w.m = m
	w.o = newOracle(m)
	w.names = make([]nameState, len(w.sc.names))
	w.st.init(len(w.sc.names))
	if opts.Trace != nil {
		w.trace = newTraceWriter(opts.Trace)
	}
	if opts.Timeline {
		w.tl = &timelineRec{}
	}
	return w, nil
}

// run plays the whole run: setup, workload, drain and the final checks.
func (w *world) run() {
	w.setup()
	limit := w.opts.steps()
	drainLimit := limit + 200_000 + limit/2
	for w.q.len() > 0 && w.fail == nil {
		it := w.q.pop()
		w.now = it.at
		w.handle(&it)
		if w.opts.stopAt > 0 && w.steps > w.opts.stopAt {
			return
		}
		if !w.stopped && w.steps >= limit {
			w.stopped = true
		}
		if w.sc.shutdown > 0 && !w.shutdownSent && w.steps >= w.sc.shutdown {
			w.shutdownSent = true
			w.q.push(item{at: w.now, kind: evShutdown})
		}
		if w.steps > drainLimit && w.fail == nil {
			w.failNow("drain", "the run did not drain within %d core events", drainLimit)
		}
	}
	if w.fail == nil {
		w.finalChecks()
	}
	w.now = max(w.lastEv, min(w.now, w.failAt()))
	w.st.finish(w)
}

func (w *world) setup() {
	for i := range w.sc.names {
		spec := &w.sc.names[i]
		if spec.initial {
			w.do(core.Event{Kind: core.EvSubmitManager, Now: 0, Model: spec.id, Op: core.OpApply, Config: spec.base,
				Timeout: core.NoTimeout}, -1)
		}
		w.names[i].on = w.r.IntN(4) != 0
		w.names[i].phaseEnd = w.r.expo(w.phaseMean(i))
		w.q.push(item{at: w.r.expo(spec.gap), kind: evArrival, a: int32(i)})
	}
	w.q.push(item{at: w.r.expo(w.sc.mgrGap), kind: evManager})
	if w.sc.bulkGap > 0 {
		w.q.push(item{at: w.r.expo(w.sc.bulkGap), kind: evBulk})
	}
	w.q.push(item{at: w.r.expo(w.sc.tickGap), kind: evSpuriousTick})
	w.q.push(item{at: w.opts.stallBound() / 4, kind: evWatchdog})
}

func (w *world) phaseMean(i int) int64 {
	if w.names[i].on {
		return w.sc.names[i].on
	}
	return w.sc.names[i].off
}

// failAt is when the run failed, or the end of time.
func (w *world) failAt() int64 {
	if w.fail != nil {
		return w.fail.Time
	}
	return w.lastEv
}

func (w *world) failNow(check, format string, args ...any) {
	w.o.failf(check, w.now, format, args...)
	w.takeFailure()
}

func (w *world) takeFailure() {
	if w.fail == nil && w.o.fail != nil {
		w.fail = w.o.fail
		w.fail.Seed, w.fail.Mutants, w.fail.Step = w.opts.Seed, w.opts.Mutants, w.steps
	}
}

// do applies one core event, checks everything and carries out the effects.
// ref is the model handle of a completion's job (-1 otherwise).
func (w *world) do(ev core.Event, ref int32) (core.Ticket, bool, error) {
	o := &w.o
	o.pre(&ev)
	tk, ok, err := apply(w.m, &ev)
	w.steps++
	w.lastEv = ev.Now
	effs := w.m.Effects()
	o.post(&ev, tk, ok, err, effs)
	if w.trace != nil && err == nil {
		w.trace.event(w.m, &ev, tk, effs)
	}
	if w.opts.record {
		r := recEv{ev: ev, tk: tk}
		if ref >= 0 {
			r.jm = w.m.ID(core.Handle(ref))
		}
		w.rec = append(w.rec, r)
	}
	if o.fail == nil && !w.opts.NoInvariants {
		if ierr := w.m.CheckInvariants(); ierr != nil {
			var ie *core.InvariantError
			name := "?"
			if errors.As(ierr, &ie) {
				name = ie.Name
			}
			o.failf("invariant:"+name, ev.Now, "after %s: %v", ev.Kind, ierr)
		}
	}
	w.react(&ev, tk, ref, effs)
	w.m.Advance()
	if o.fail != nil {
		w.takeFailure()
	}
	switch {
	case ev.Kind == core.EvSubmitManager || (w.idleCand && w.sc.opts.IdleTimeout > 0) ||
		(w.sc.opts.LoadBackoff > 0 && (ev.Kind == core.EvLoadDone || ev.Kind == core.EvCloneDone)):
		// A manager's deadline is core's to compute; a model that may have
		// gone idle may have an idle-retirement deadline; a failed load may
		// have started a backoff, which ends on a Tick.
		w.schedTick(w.m.NextDeadline())
	case ev.Kind == core.EvSubmitRequest && o.cur.dead > 0 && o.find(tk) >= 0:
		// A queued request's deadline is the contract's, which the oracle
		// computed (and the watchdog compares with core's).
		w.schedTick(o.cur.dead)
	}
	return tk, ok, err
}

// schedTick keeps one Tick scheduled at the earliest known deadline. A
// deadline only appears with a submission or, with idle retirement, when a
// model goes idle; a tick that finds nothing due asks core's NextDeadline
// when to come back instead of applying an empty Tick.
func (w *world) schedTick(nd int64) {
	if nd > 0 && (w.tickAt == 0 || nd < w.tickAt) {
		w.tickAt = nd
		w.q.push(item{at: max(nd, w.now), kind: evTick, job: core.Job(nd)})
	}
}

// tick plays a scheduled Tick if core has something due now.
func (w *world) tick(at int64) {
	if at != w.tickAt {
		return // superseded by an earlier deadline
	}
	w.tickAt = 0
	nd := w.m.NextDeadline()
	if nd == 0 {
		return
	}
	if nd > w.now {
		w.schedTick(nd)
		return
	}
	w.do(core.Event{Kind: core.EvTick, Now: w.now}, -1)
	w.schedTick(w.m.NextDeadline())
}

func (w *world) clientOf(tk core.Ticket) *client {
	i := int(uint32(tk))
	for i >= len(w.cl) {
		w.cl = append(w.cl, client{})
	}
	c := &w.cl[i]
	if c.id != tk {
		*c = w.pending
		c.id = tk
	}
	return c
}

// react carries out the effects of one event: backend jobs start, granted
// requests run, and the statistics and timeline see what changed.
func (w *world) react(ev *core.Event, tk core.Ticket, ref int32, effs []core.Effect) {
	w.touched = w.touched[:0]
	w.allHit, w.idleCand = false, false
	switch ev.Kind {
	case core.EvSubmitRequest, core.EvSubmitManager:
		if h, ok := w.m.Lookup(ev.Model); ok {
			w.touch(h)
		}
	case core.EvCancel, core.EvRelease:
		if i := int(uint32(ev.Ticket)); i < len(w.o.t) && w.o.t[i].id == ev.Ticket {
			if t := &w.o.t[i]; t.known && t.kind != kBulk {
				w.touch(t.h)
			} else {
				w.allHit = true
			}
		}
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		if ref >= 0 {
			w.touch(core.Handle(ref))
		}
	default:
		w.allHit = true
	}
	for k := range effs {
		e := &effs[k]
		switch e.Kind {
		case core.EfGrant:
			w.granted(e)
		case core.EfReject, core.EfDone:
			w.st.ended(w, e)
			w.clientEnded(e.Ticket)
		case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown:
			w.startJob(e)
		case core.EfShutdownComplete:
			w.st.shutdownDone = w.now
			w.allHit = true
		}
		if e.Kind != core.EfShutdownComplete && (e.Ticket == 0 || uint32(e.Ticket) < uint32(len(w.o.t)) && w.o.t[uint32(e.Ticket)].kind != kBulk) {
			w.touch(e.Model)
		}
	}
	if w.allHit {
		for h := range w.m.Len() {
			w.st.touch(w, core.Handle(h))
		}
		return
	}
	for _, h := range w.touched {
		w.st.touch(w, h)
	}
}

func (w *world) touch(h core.Handle) {
	for _, x := range w.touched {
		if x == h {
			return
		}
	}
	w.touched = append(w.touched, h)
}

// granted starts a granted request's inference: offline or streamed.
func (w *world) granted(e *core.Effect) {
	c := w.clientOf(e.Ticket)
	w.st.granted(w, e)
	if c.stream {
		c.chunks = 1 + int32(w.r.IntN(10))
		w.q.push(item{at: w.now + w.r.spread(w.sc.lat.chunk, w.sc.lat.spread), kind: evChunk, tk: e.Ticket, b: 1})
		return
	}
	w.q.push(item{at: w.now + w.r.spread(w.sc.lat.infer, w.sc.lat.spread), kind: evInferDone, tk: e.Ticket,
		f: w.r.ppm(w.sc.rate.infer)})
}

// startJob runs a backend step on the simulated engine: its latency and
// outcome are drawn now and its completion waits in the heap.
func (w *world) startJob(e *core.Effect) {
	sc, r := &w.sc, w.r
	it := item{kind: evJob, a: int32(e.Model), job: e.Job, b: int32(e.Kind)}
	var d int64
	switch e.Kind {
	case core.EfStartLoad:
		d = r.spread(sc.lat.load, sc.lat.spread)
		it.f = r.ppm(sc.rate.load)
		it.c = int32(sc.capacity(e.Config))
		if r.ppm(sc.rate.capLow) {
			it.c = max(1, it.c/2)
		}
		w.st.loads++
	case core.EfStartClone:
		d = r.spread(sc.lat.clone, sc.lat.spread)
		it.f = r.ppm(sc.rate.clone)
		w.st.clones++
	case core.EfStartProbe:
		d = r.spread(sc.lat.probe, sc.lat.spread)
		it.f = r.ppm(sc.rate.probe)
		it.c = int32(sc.capacity(e.Config))
		if r.ppm(sc.rate.capLow) {
			it.c = max(1, it.c/2)
		}
		w.st.probes++
	case core.EfStartTeardown:
		d = r.spread(sc.lat.teardown, sc.lat.spread)
		switch {
		case r.ppm(sc.rate.hungTeardown):
			d = r.between(5*secs, 60*secs) // hung, then finishing
			w.st.slowTeardowns++
		case r.ppm(sc.rate.slowTeardown):
			d *= r.between(20, 100)
			w.st.slowTeardowns++
		}
		w.st.teardown(e.Cause)
		if w.tl != nil {
			w.tl.mark(w.now, e.Model, markTeardown, e.Cause.String())
		}
	}
	if r.IntN(64) == 0 {
		d = 0 // completes at the same instant
	}
	it.at = w.now + d
	w.q.push(it)
}

// handle plays one heap item.
func (w *world) handle(it *item) {
	switch it.kind {
	case evArrival:
		w.arrival(it)
	case evManager:
		w.manager()
	case evBulk:
		w.bulk()
	case evJob, evDupJob:
		w.jobDone(it)
	case evInferDone:
		if i := w.o.find(it.tk); i >= 0 && w.o.t[i].st == tsRunning {
			c := w.clientOf(it.tk)
			w.release(it.tk, it.f || c.gone)
		}
	case evChunk:
		w.chunk(it)
	case evDisconnect:
		w.disconnect(it.tk)
	case evClientTimeout:
		if i := w.o.find(it.tk); i >= 0 {
			if w.o.t[i].st == tsWaiting || w.r.ppm(w.sc.rate.misuse*20) {
				w.do(core.Event{Kind: core.EvCancel, Now: w.now, Ticket: it.tk, Reason: core.ReasonTimeout}, -1)
			}
		}
	case evTick:
		w.tick(int64(it.job))
	case evSpuriousTick:
		if !w.stopped {
			w.do(core.Event{Kind: core.EvTick, Now: w.now}, -1)
			w.q.push(item{at: w.now + w.r.expo(w.sc.tickGap), kind: evSpuriousTick})
		}
	case evShutdown:
		w.do(core.Event{Kind: core.EvBeginShutdown, Now: w.now}, -1)
		if it.a == 0 {
			if w.tl != nil {
				w.tl.mark(w.now, 0, markShutdown, "")
			}
			if w.r.IntN(4) == 0 { // a repeated stop signal changes nothing
				w.q.push(item{at: w.now + w.r.expo(100*millis), kind: evShutdown, a: 1})
			}
		}
	case evWatchdog:
		w.schedTick(w.m.NextDeadline())
		w.watchdog()
		if w.q.len() > 0 {
			w.q.push(item{at: w.now + w.opts.stallBound()/4, kind: evWatchdog})
		}
	case evDupRelease:
		w.do(core.Event{Kind: core.EvRelease, Now: w.now, Ticket: it.tk, Failed: it.f}, -1)
	case evLateCancel:
		w.do(core.Event{Kind: core.EvCancel, Now: w.now, Ticket: it.tk, Reason: core.Reason(it.b)}, -1)
	case evEarlyRelease:
		if i := w.o.find(it.tk); i >= 0 && w.o.t[i].st == tsWaiting {
			w.do(core.Event{Kind: core.EvRelease, Now: w.now, Ticket: it.tk}, -1)
		}
	}
}

// clientEnded frees the population place of a ticket that ended: a
// model's request client (name >= 0), a manager (-2) or a bulk (-1).
func (w *world) clientEnded(tk core.Ticket) {
	if i := int(uint32(tk)); i < len(w.cl) && w.cl[i].id == tk && w.cl[i].counted {
		w.cl[i].counted = false
		switch w.cl[i].name {
		case -1:
			w.bulksOut--
			return
		case -2:
			w.mgrsOut--
			return
		}
		ns := &w.names[w.cl[i].name]
		ns.out--
		if ns.parked && !w.stopped {
			ns.parked = false
			spec := &w.sc.names[w.cl[i].name]
			w.q.push(item{at: w.now + 1 + w.r.expo(spec.gap), kind: evArrival, a: w.cl[i].name})
		}
	}
}

func (w *world) release(tk core.Ticket, failed bool) {
	w.do(core.Event{Kind: core.EvRelease, Now: w.now, Ticket: tk, Failed: failed}, -1)
	if w.o.find(tk) < 0 {
		w.clientEnded(tk)
	}
	if w.r.ppm(w.sc.rate.misuse) { // a duplicate completion callback
		w.q.push(item{at: w.now + w.r.between(0, millis), kind: evDupRelease, tk: tk, f: failed})
	}
	if w.r.ppm(w.sc.rate.misuse) { // a timer that fires after the answer
		w.q.push(item{at: w.now + w.r.between(0, millis), kind: evLateCancel, tk: tk, b: int32(core.ReasonTimeout)})
	}
}

func (w *world) chunk(it *item) {
	i := w.o.find(it.tk)
	if i < 0 || w.o.t[i].st != tsRunning {
		return
	}
	c := w.clientOf(it.tk)
	switch {
	case c.gone || w.r.ppm(w.sc.rate.write): // the write fails: the stream unwinds
		w.release(it.tk, true)
	case w.r.ppm(w.sc.rate.infer):
		w.release(it.tk, true)
	case it.b >= c.chunks:
		w.release(it.tk, false)
	default:
		w.q.push(item{at: w.now + w.r.spread(w.sc.lat.chunk, w.sc.lat.spread), kind: evChunk, tk: it.tk, b: it.b + 1})
	}
}

func (w *world) disconnect(tk core.Ticket) {
	i := w.o.find(tk)
	if i < 0 {
		return
	}
	if w.o.t[i].st == tsRunning {
		w.clientOf(tk).gone = true // noticed at the next write
		return
	}
	if w.o.t[i].kind == kBulk && w.o.t[i].cancelled {
		return
	}
	w.do(core.Event{Kind: core.EvCancel, Now: w.now, Ticket: tk, Reason: core.ReasonDisconnect}, -1)
}

func (w *world) jobDone(it *item) {
	ev := core.Event{Now: w.now, Job: it.job, Failed: it.f, Capacity: int(it.c)}
	switch core.EffectKind(it.b) {
	case core.EfStartLoad:
		ev.Kind = core.EvLoadDone
		if it.f {
			w.st.loadFails++
		}
	case core.EfStartClone:
		ev.Kind = core.EvCloneDone
		if it.f {
			w.st.cloneFails++
		}
	case core.EfStartProbe:
		ev.Kind = core.EvProbeDone
		if it.f {
			w.st.probeFails++
		}
	case core.EfStartTeardown:
		ev.Kind = core.EvTeardownDone
		ev.Failed, ev.Capacity = false, 0
	}
	if it.kind == evDupJob {
		w.do(ev, it.a)
		return
	}
	if w.tl != nil && it.f {
		w.tl.mark(w.now, core.Handle(it.a), markFail, ev.Kind.String())
	}
	w.do(ev, it.a)
	if w.r.ppm(w.sc.rate.misuse) { // a duplicate completion from the engine
		dup := *it
		dup.kind, dup.at = evDupJob, w.now+w.r.between(0, 10*millis)
		if w.r.IntN(4) == 0 {
			dup.job, dup.a = core.Job(0xfffff)<<32|core.Job(w.r.IntN(100)), -1 // a job core never issued
		}
		w.q.push(dup)
	}
}
