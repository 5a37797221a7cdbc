package sim

import (
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/core"
)

// tstate is where the oracle believes a ticket stands.
type tstate uint8

const (
	tsNone    tstate = iota
	tsWaiting        // submitted, no terminal effect and no grant yet
	tsRunning        // a granted request holding its lease
	tsEnded          // terminal effect seen (or released)
)

// tkind says what a ticket stands for.
type tkind uint8

const (
	kReq tkind = iota + 1
	kMgr
	kBulk
)

// tinfo is the oracle's record of one ticket, indexed by the ticket's slab
// index (its low 32 bits), which core reuses once the ticket ended.
type tinfo struct {
	id        core.Ticket
	st        tstate
	kind      tkind
	op        core.Op
	known     bool // the model was registered when the ticket was submitted
	cancelled bool // a bulk whose client went away
	slot      int8
	h         core.Handle
	seq       uint64 // submission order
	submit    int64
	grant     int64
	dead      int64            // expected admission deadline of a request, 0 for none
	bulk      *core.BulkResult // expected answer of a bulk unload
}

// omodel is the oracle's picture of one model as a client and as the engine
// see it: who holds which slot, which backend job runs, and which sessions
// physically exist.
type omodel struct {
	slotOwner  [core.MaxSlots]core.Ticket
	running    int
	waiting    int // requests and managers neither granted nor ended
	job        core.Job
	jkind      core.EffectKind
	jobAt      int64
	tdSessions int32
	sessions   int
	resident   bool
	resMB      int64
	built      *core.Config // what the physical sessions are built from
	published  bool         // between the core's Publish and Retire of the pool
	// wq lists the model's requests in submission order; entries before
	// wqHead, and entries no longer waiting, are skipped lazily.
	wq     []tref
	wqHead int
	mgrs   []tref // targeted managers that have not ended
	// failAt is when the model's last load failed (0: none since its pool
	// last served a grant): a backoff refusal needs one (fail.load-backoff).
	failAt int64
}

// tref names a ticket with its submission order.
type tref struct {
	id  core.Ticket
	seq uint64
}

// expect is what the oracle learned about an event before it was applied.
type expect struct {
	tidx       int32 // ticket of a Cancel or Release, -1 when ended or unknown
	tstate     tstate
	known      bool
	h          core.Handle
	dead       int64
	jobCur     bool
	jh         core.Handle
	terminal   bool // the ticket of a Cancel ended in this event
	bulkIDs    []core.Handle
	bulkBefore []barrierView
	bulkRes    *core.BulkResult
}

// oracle checks client-visible and engine-visible properties of the core
// from the outside, event by event. The simulator and the replay of the
// minimizer share it, so a minimized run fails for the same reason.
type oracle struct {
	m        *core.Machine
	opts     core.Options
	t        []tinfo
	md       []omodel
	live     int
	bulks    int // live bulk parents
	jobs     int
	physN    int
	physMB   int64
	shutdown bool
	complete bool
	fail     *Failure
	cur      expect
	seq      uint64
	grants   []tref // requests granted in the current event
	grantsH  []core.Handle
	// pendingUnload lists models whose unload manager answered Done in
	// this event; they must not be loaded when the event ends.
	pendingUnload []core.Handle
	// unregs lists the unregisters answered Done in the current event: the
	// model and the unregister's submission order. Tickets of that model
	// submitted after it may be answered not_found in the same event, and
	// none of them may still wait after it (CONTRACT.md unreg.barrier,
	// unreg.404-after).
	unregs []tref
}

func newOracle(m *core.Machine) oracle {
	return oracle{m: m, opts: m.Options()}
}

func (o *oracle) failf(check string, now int64, format string, args ...any) {
	if o.fail == nil {
		o.fail = &Failure{Check: check, Time: now, Detail: fmt.Sprintf(format, args...)}
	}
}

// find returns the index of a live ticket, or -1.
func (o *oracle) find(tk core.Ticket) int32 {
	i := uint32(tk)
	if int(i) < len(o.t) && o.t[i].id == tk && (o.t[i].st == tsWaiting || o.t[i].st == tsRunning) {
		return int32(i)
	}
	return -1
}

func (o *oracle) model(h core.Handle) *omodel {
	for int(h) >= len(o.md) {
		o.md = append(o.md, omodel{})
	}
	return &o.md[h]
}

// deadline is the contract's effective admission timeout of a request
// (CONTRACT.md "Timeout, disconnect and shutdown": the request's override,
// else the model's, else the server default, where NoTimeout means "not
// set" and 0 unbounded; the server ceiling bounds all of them).
func (o *oracle) deadline(now int64, cfgTimeout int64, override int64) int64 {
	d := override
	if d < 0 {
		d = cfgTimeout
		if d < 0 {
			d = o.opts.DefaultAdmissionTimeout
		}
	}
	if c := o.opts.AdmissionCeiling; c > 0 && (d == 0 || d > c) {
		d = c
	}
	if d > 0 {
		return now + d
	}
	return 0
}

// pre records what the oracle expects of ev before it is applied.
func (o *oracle) pre(ev *core.Event) {
	c := &o.cur
	c.tidx, c.jobCur, c.terminal, c.known, c.dead = -1, false, false, false, 0
	switch ev.Kind {
	case core.EvSubmitRequest:
		if h, ok := o.m.Lookup(ev.Model); ok {
			c.known, c.h = true, h
			c.dead = o.deadline(ev.Now, o.m.Config(h).AdmissionTimeout, ev.Timeout)
		}
	case core.EvSubmitManager:
		c.h, c.known = o.m.Lookup(ev.Model)
		switch {
		case c.known:
			c.dead = o.deadline(ev.Now, o.m.Config(c.h).AdmissionTimeout, ev.Timeout)
		case ev.Op == core.OpApply:
			// A registration waits without a timeout of its own: only the
			// server ceiling bounds it.
			c.dead = o.deadline(ev.Now, 0, 0)
		}
	case core.EvSubmitBulkUnload:
		o.preBulk(ev)
	case core.EvCancel, core.EvRelease:
		c.tidx = o.find(ev.Ticket)
		if c.tidx >= 0 {
			t := &o.t[c.tidx]
			c.tstate = t.st
			if ev.Kind == core.EvCancel && t.kind == kBulk && ev.Reason == core.ReasonDisconnect {
				t.cancelled = true
			}
		}
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		want := jobEffect(ev.Kind)
		for h := range o.md {
			if md := &o.md[h]; md.job == ev.Job && md.job != 0 && md.jkind == want {
				c.jobCur, c.jh = true, core.Handle(h)
			}
		}
	case core.EvBeginShutdown:
		o.shutdown = true
	}
}

// jobEffect maps a completion event to the effect that started its job.
func jobEffect(k core.EventKind) core.EffectKind {
	switch k {
	case core.EvLoadDone:
		return core.EfStartLoad
	case core.EvCloneDone:
		return core.EfStartClone
	case core.EvProbeDone:
		return core.EfStartProbe
	case core.EvTeardownDone:
		return core.EfStartTeardown
	}
	return core.EfNone
}

// preBulk computes a bulk unload's expected answer and counts the member
// barriers already on each selected model.
func (o *oracle) preBulk(ev *core.Event) {
	c := &o.cur
	c.bulkIDs, c.bulkBefore = c.bulkIDs[:0], c.bulkBefore[:0]
	res := &core.BulkResult{}
	for k, id := range ev.Models {
		dup := false
		for _, p := range ev.Models[:k] {
			dup = dup || p == id
		}
		if dup {
			continue
		}
		if h, ok := o.m.Lookup(id); ok {
			res.Unloaded = append(res.Unloaded, id)
			c.bulkIDs = append(c.bulkIDs, h)
			c.bulkBefore = append(c.bulkBefore, o.barriers(h))
		} else {
			res.NotFound = append(res.NotFound, id)
		}
	}
	c.bulkRes = res
}

// post checks ev's results and effects and updates the oracle's picture.
func (o *oracle) post(ev *core.Event, tk core.Ticket, ok bool, err error, effs []core.Effect) {
	c := &o.cur
	now := ev.Now
	switch ev.Kind {
	case core.EvSubmitRequest, core.EvSubmitManager, core.EvSubmitBulkUnload:
		if err != nil {
			o.failf("submit-error", now, "%s returned %v", ev.Kind, err)
			return
		}
		o.submitted(ev, tk)
	case core.EvCancel:
		if c.tidx < 0 {
			if ok || !errors.Is(err, core.ErrUnknownTicket) {
				o.failf("stale-cancel", now, "Cancel of ended ticket %s returned %v, %v; want ErrUnknownTicket", tname(ev.Ticket), ok, err)
			}
		} else if err != nil {
			o.failf("cancel-refused", now, "Cancel of live ticket %s: %v", tname(ev.Ticket), err)
		}
	case core.EvRelease:
		o.postRelease(ev, err)
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		o.postJob(ev, err)
	}
	o.grants, o.grantsH = o.grants[:0], o.grantsH[:0]
	for k := range effs {
		o.effect(ev, tk, &effs[k])
	}
	if len(o.grants) > 0 {
		o.checkOrder(now)
	}
	switch ev.Kind {
	case core.EvCancel:
		if c.tidx >= 0 {
			o.postCancel(ev, ok)
		}
	case core.EvSubmitBulkUnload:
		o.postBulk(ev, tk)
	case core.EvTick:
		if nd := o.m.NextDeadline(); nd != 0 && nd <= now {
			o.failf("tick-left-due", now, "after Tick(%d) NextDeadline is %d, still due", now, nd)
		}
	}
	if (ev.Kind == core.EvSubmitRequest || ev.Kind == core.EvSubmitManager || ev.Kind == core.EvSubmitBulkUnload) && o.shutdown {
		if i := o.find(tk); i >= 0 {
			o.failf("admitted-after-shutdown", now, "ticket %s submitted after BeginShutdown did not end at once", tname(tk))
		}
	}
	o.postGlobal(now)
}

func (o *oracle) submitted(ev *core.Event, tk core.Ticket) {
	c := &o.cur
	i := uint32(tk)
	for int(i) >= len(o.t) {
		o.t = append(o.t, tinfo{})
	}
	t := &o.t[i]
	if t.st == tsWaiting || t.st == tsRunning {
		o.failf("ticket-reused", ev.Now, "ticket %s reuses the slot of live ticket %s", tname(tk), tname(t.id))
		return
	}
	o.seq++
	*t = tinfo{id: tk, st: tsWaiting, submit: ev.Now, slot: -1, seq: o.seq}
	switch ev.Kind {
	case core.EvSubmitRequest:
		t.kind, t.known, t.h, t.dead = kReq, c.known, c.h, c.dead
	case core.EvSubmitManager:
		t.kind, t.op, t.dead = kMgr, ev.Op, c.dead
		if h, ok := o.m.Lookup(ev.Model); ok {
			t.known, t.h = true, h // a registering apply knows its model from now on
		}
	case core.EvSubmitBulkUnload:
		t.kind, t.op, t.bulk = kBulk, core.OpBulk, c.bulkRes
	}
	o.live++
	if t.kind == kBulk {
		o.bulks++
	}
	if t.known {
		md := o.model(t.h)
		md.waiting++
		switch t.kind {
		case kReq:
			md.wq = append(md.wq, tref{tk, t.seq})
		case kMgr:
			md.mgrs = append(md.mgrs, tref{tk, t.seq})
		}
	}
}

func (o *oracle) postRelease(ev *core.Event, err error) {
	c := &o.cur
	if c.tidx < 0 {
		if !errors.Is(err, core.ErrUnknownTicket) {
			o.failf("stale-release", ev.Now, "Release of ended ticket %s returned %v; want ErrUnknownTicket", tname(ev.Ticket), err)
		}
		return
	}
	t := &o.t[c.tidx]
	if t.kind != kReq || t.st != tsRunning {
		if !errors.Is(err, core.ErrNotRunning) {
			o.failf("release-not-running", ev.Now, "Release of ticket %s without a lease returned %v; want ErrNotRunning", tname(ev.Ticket), err)
		}
		return
	}
	if err != nil {
		o.failf("release-refused", ev.Now, "Release of running ticket %s: %v", tname(ev.Ticket), err)
		return
	}
	md := o.model(t.h)
	md.slotOwner[t.slot] = 0
	md.running--
	t.st = tsEnded
	o.live--
}

func (o *oracle) postJob(ev *core.Event, err error) {
	c := &o.cur
	if !c.jobCur {
		if !errors.Is(err, core.ErrStaleJob) {
			o.failf("stale-job", ev.Now, "%s of job %d nobody runs returned %v; want ErrStaleJob", ev.Kind, ev.Job, err)
		}
		return
	}
	if err != nil {
		o.failf("job-refused", ev.Now, "%s of current job %d: %v", ev.Kind, ev.Job, err)
		return
	}
	md := &o.md[c.jh]
	md.job, md.jkind = 0, core.EfNone
	o.jobs--
	switch ev.Kind {
	case core.EvLoadDone:
		if ev.Failed {
			md.sessions = 0
			o.unresident(md)
		} else {
			md.sessions = 1
		}
		if ev.Failed || ev.Capacity < o.m.Config(c.jh).Slots {
			md.failAt = ev.Now
		}
	case core.EvCloneDone:
		if !ev.Failed {
			md.sessions++
		} else {
			md.failAt = ev.Now
		}
	case core.EvTeardownDone:
		md.sessions -= int(md.tdSessions)
		if md.sessions != 0 {
			o.failf("teardown-left-sessions", ev.Now, "%s: teardown left %d sessions", o.m.ID(c.jh), md.sessions)
		}
		md.sessions = 0
		o.unresident(md)
	}
}

func (o *oracle) unresident(md *omodel) {
	if md.resident {
		md.resident = false
		o.physN--
		o.physMB -= md.resMB
		md.resMB = 0
	}
}

func (o *oracle) end(t *tinfo) {
	if t.known && t.kind != kBulk {
		md := o.model(t.h)
		md.waiting--
		if t.kind == kMgr {
			for k, g := range md.mgrs {
				if g.id == t.id {
					md.mgrs = append(md.mgrs[:k], md.mgrs[k+1:]...)
					break
				}
			}
		}
	}
	if t.kind == kBulk {
		o.bulks--
	}
	t.st = tsEnded
	o.live--
}
