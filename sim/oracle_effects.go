package sim

import (
	"fmt"

	"github.com/sluice-dev/sluice/core"
)

// barriers returns the managers queued on model h and its state: what a
// bulk's publication changes.
func (o *oracle) barriers(h core.Handle) barrierView {
	st := o.m.Status(h)
	return barrierView{queued: st.QueuedManagers, state: st.State}
}

// effect checks one effect against the oracle's picture.
func (o *oracle) effect(ev *core.Event, tk core.Ticket, e *core.Effect) {
	now := ev.Now
	switch e.Kind {
	case core.EfGrant:
		o.grant(now, e)
	case core.EfReject, core.EfDone:
		i := o.find(e.Ticket)
		if i < 0 {
			o.failf("terminal-twice", now, "%s for ticket %s that already ended or never existed", e.Kind, tname(e.Ticket))
			return
		}
		t := &o.t[i]
		if ev.Kind == core.EvCancel && e.Ticket == ev.Ticket {
			o.cur.terminal = true
		}
		if t.st == tsRunning {
			o.failf("terminal-after-grant", now, "%s for granted ticket %s", e.Kind, tname(e.Ticket))
			return
		}
		if e.Kind == core.EfReject {
			if why := o.badCode(ev, tk, t, e.Code); why != "" {
				o.failf("reject-code", now, "ticket %s (%s) rejected %s: %s", tname(e.Ticket), kindName(t), e.Code, why)
			}
			if why := o.badRetry(now, t, e); why != "" {
				o.failf("backoff-refusal", now, "ticket %s (%s) rejected %s with RetryAfter %d: %s", tname(e.Ticket),
					kindName(t), e.Code, e.RetryAfter, why)
			}
		} else {
			o.done(now, t, e)
		}
		o.end(t)
	case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown:
		o.startJob(now, e)
	case core.EfPublish, core.EfRetire:
		o.pool(now, e)
	case core.EfShutdownComplete:
		if !o.shutdown || o.complete {
			o.failf("shutdown-complete", now, "ShutdownComplete (shutting down=%v, already complete=%v)", o.shutdown, o.complete)
		}
		o.complete = true
	}
}

func kindName(t *tinfo) string {
	switch t.kind {
	case kReq:
		return "request"
	case kMgr:
		return "manager " + t.op.String()
	}
	return "bulk"
}

func (o *oracle) grant(now int64, e *core.Effect) {
	if int(e.Model) < len(o.md) {
		o.md[e.Model].failAt = 0 // a pool serves: its load succeeded
	}
	i := o.find(e.Ticket)
	if i < 0 {
		o.failf("grant-unknown", now, "Grant for ended or unknown ticket %s", tname(e.Ticket))
		return
	}
	t := &o.t[i]
	switch {
	case t.kind != kReq:
		o.failf("grant-manager", now, "Grant for %s ticket %s", kindName(t), tname(e.Ticket))
		return
	case t.st != tsWaiting:
		o.failf("grant-twice", now, "second Grant for ticket %s", tname(e.Ticket))
		return
	case !t.known || e.Model != t.h:
		o.failf("grant-model", now, "ticket %s granted on model %d, submitted to %d", tname(e.Ticket), e.Model, t.h)
		return
	}
	md := o.model(t.h)
	st := o.m.Status(t.h)
	c := o.m.Config(t.h)
	cfg := &c
	switch {
	case !md.published:
		o.failf("grant-unpublished", now, "%s: ticket %s granted with no published pool", st.ID, tname(e.Ticket))
	case e.Version != st.ConfigVersion:
		o.failf("grant-version", now, "%s: ticket %s granted v%d, committed v%d", st.ID, tname(e.Ticket), e.Version, st.ConfigVersion)
	case md.built == nil || !samePool(md.built, cfg) || md.sessions != cfg.Slots || md.job != 0:
		o.failf("grant-pool", now, "%s: ticket %s granted on %d engine sessions (job %s) built for %s; committed %s",
			st.ID, tname(e.Ticket), md.sessions, md.jkind, cfgString(md.built), cfgString(cfg))
	case e.Slot < 0 || int(e.Slot) >= cfg.Slots || md.slotOwner[e.Slot] != 0:
		o.failf("grant-slot", now, "%s: ticket %s granted slot %d of %d, held by %s", st.ID, tname(e.Ticket), e.Slot, cfg.Slots,
			tname(md.slotOwner[max(0, min(int(e.Slot), core.MaxSlots-1))]))
	}
	t.st, t.slot, t.grant = tsRunning, int8(e.Slot), now
	o.grants = append(o.grants, tref{e.Ticket, t.seq})
	o.grantsH = append(o.grantsH, t.h)
	if e.Slot >= 0 && e.Slot < core.MaxSlots {
		md.slotOwner[e.Slot] = e.Ticket
	}
	md.running++
	md.waiting--
}

// samePool reports whether sessions built from a serve committed config b
// unchanged (only admission metadata may differ).
func samePool(a, b *core.Config) bool {
	return a.Task == b.Task && a.Engine == b.Engine && a.Checkpoint == b.Checkpoint && a.Options == b.Options &&
		a.Slots == b.Slots && a.MemoryMB == b.MemoryMB
}

func cfgString(c *core.Config) string {
	if c == nil {
		return "nothing"
	}
	return fmt.Sprintf("%s/%s slots=%d mem=%d", c.Checkpoint, c.Options, c.Slots, c.MemoryMB)
}

// badRetry says why a Reject cannot carry its RetryAfter, or "": only a
// request refused server_busy for a load backoff carries one, after a
// failed load of its model, and the backoff ends no later than the cap
// after that failure (CONTRACT.md fail.load-backoff).
func (o *oracle) badRetry(now int64, t *tinfo, e *core.Effect) string {
	if e.RetryAfter == 0 {
		return ""
	}
	ceil := max(o.opts.LoadBackoff, o.opts.LoadBackoffMax)
	md := &o.md[t.h]
	switch {
	case e.RetryAfter < 0 || e.Code != core.CodeServerBusy || t.kind != kReq:
		return "only a request's server_busy carries a backoff"
	case o.opts.LoadBackoff == 0:
		return "the machine does not back off"
	case md.failAt == 0:
		return "no load of the model failed since its pool last served"
	case now+e.RetryAfter > md.failAt+ceil && md.failAt+ceil > now:
		return fmt.Sprintf("the backoff ends after the last failure (at %d) plus the cap %d", md.failAt, ceil)
	}
	return ""
}

// badCode says why code cannot end ticket t in event ev, or "".
func (o *oracle) badCode(ev *core.Event, tk core.Ticket, t *tinfo, code core.Code) string {
	submit := ev.Kind == core.EvSubmitRequest || ev.Kind == core.EvSubmitManager || ev.Kind == core.EvSubmitBulkUnload
	switch code {
	case core.CodeServerBusy:
		if t.kind == kBulk {
			return "bulk waits are unbounded"
		}
	case core.CodeShuttingDown:
		if !o.shutdown {
			return "not shutting down"
		}
	case core.CodeInvalid:
		if t.kind == kBulk || (t.kind == kReq && ev.Kind != core.EvLoadDone) {
			return "only a bad config or a load's capacity is invalid"
		}
	case core.CodeNotFound:
		if t.known && t.kind != kBulk && o.behindUnregister(t) {
			break
		}
		if t.known || !submit || t.id != tk {
			return "the model is registered"
		}
	case core.CodeBackend:
		// A manager whose load failed after building private sessions is
		// answered when their teardown ends (reg.first-load-failure).
		if t.kind == kMgr && ev.Kind == core.EvTeardownDone {
			break
		}
		if t.kind == kBulk || !ev.Failed || (ev.Kind != core.EvLoadDone && ev.Kind != core.EvCloneDone && ev.Kind != core.EvProbeDone) {
			return "no backend step failed"
		}
		if t.kind == kReq && ev.Kind == core.EvProbeDone {
			return "a probe serves only its manager"
		}
	case core.CodeCancelled:
		if t.kind == kBulk {
			if !t.cancelled {
				return "the bulk's client did not go away"
			}
		} else if ev.Kind != core.EvCancel || ev.Reason != core.ReasonDisconnect || ev.Ticket != t.id {
			return "its client did not go away"
		}
	default:
		return "not a rejection code"
	}
	return ""
}

func (o *oracle) done(now int64, t *tinfo, e *core.Effect) {
	switch t.kind {
	case kReq:
		o.failf("done-request", now, "Done for request %s", tname(e.Ticket))
	case kBulk:
		if e.Bulk == nil || !sameIDs(e.Bulk.Unloaded, t.bulk.Unloaded) || !sameIDs(e.Bulk.NotFound, t.bulk.NotFound) {
			got := core.BulkResult{}
			if e.Bulk != nil {
				got = *e.Bulk
			}
			o.failf("bulk-result", now, "bulk %s answered unloaded=%v not_found=%v, want %v %v", tname(e.Ticket),
				got.Unloaded, got.NotFound, t.bulk.Unloaded, t.bulk.NotFound)
		}
	case kMgr:
		if t.known {
			o.managerDone(now, t)
		}
		if t.op == core.OpUnload && t.known {
			o.pendingUnload = append(o.pendingUnload, t.h)
		}
		if t.op == core.OpUnregister && t.known {
			o.unregs = append(o.unregs, tref{id: core.Ticket(t.h), seq: t.seq})
		}
	}
}

func sameIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// pool checks a Publish or Retire against the engine's sessions: a pool is
// published once, complete (every slot's session built, no job running),
// and retired only while published, with the sessions it has.
func (o *oracle) pool(now int64, e *core.Effect) {
	md := o.model(e.Model)
	id := o.m.ID(e.Model)
	switch {
	case e.Kind == core.EfPublish && md.published:
		o.failf("publish-twice", now, "%s: Publish of a published pool", id)
	case e.Kind == core.EfPublish && (md.built == nil || md.sessions != md.built.Slots || int(e.Sessions) != md.sessions || md.job != 0):
		o.failf("publish-partial", now, "%s: Publish of %d sessions; the engine holds %d of %s (job %s)", id, e.Sessions,
			md.sessions, cfgString(md.built), md.jkind)
	case e.Kind == core.EfRetire && (!md.published || int(e.Sessions) != md.sessions):
		o.failf("retire-sessions", now, "%s: Retire of %d sessions (published %v); the engine holds %d", id, e.Sessions,
			md.published, md.sessions)
	}
	md.published = e.Kind == core.EfPublish
}

func (o *oracle) startJob(now int64, e *core.Effect) {
	md := o.model(e.Model)
	if md.job != 0 {
		o.failf("second-job", now, "%s %s while job %d (%s) runs", o.m.ID(e.Model), e.Kind, md.job, md.jkind)
		return
	}
	md.job, md.jkind, md.jobAt = e.Job, e.Kind, now
	o.jobs++
	switch e.Kind {
	case core.EfStartLoad:
		if md.sessions != 0 || md.resident {
			o.failf("load-over-sessions", now, "%s: StartLoad while the engine holds %d sessions", o.m.ID(e.Model), md.sessions)
		}
		if v := o.m.Status(e.Model).ConfigVersion; e.Version != v || e.Config == nil || *e.Config != o.m.Config(e.Model) {
			o.failf("load-version", now, "%s: StartLoad v%d, committed v%d", o.m.ID(e.Model), e.Version, v)
		}
		md.built = e.Config
		md.resident, md.resMB = true, e.Config.MemoryMB
		o.physN++
		o.physMB += md.resMB
	case core.EfStartClone:
		if md.sessions < 1 || int(e.Index) != md.sessions || md.built == nil || md.sessions >= md.built.Slots {
			o.failf("clone-index", now, "%s: StartClone #%d with %d sessions", o.m.ID(e.Model), e.Index, md.sessions)
		}
	case core.EfStartTeardown:
		if md.running > 0 {
			o.failf("teardown-in-use", now, "%s: StartTeardown (%s) while %d requests hold its slots", o.m.ID(e.Model), e.Cause, md.running)
		}
		if md.published {
			o.failf("teardown-serving", now, "%s: StartTeardown (%s) of a pool that was not retired", o.m.ID(e.Model), e.Cause)
		}
		if int(e.Sessions) != md.sessions {
			o.failf("teardown-sessions", now, "%s: StartTeardown of %d sessions, the engine holds %d", o.m.ID(e.Model), e.Sessions, md.sessions)
		}
		md.tdSessions = e.Sessions
	}
}

func (o *oracle) postCancel(ev *core.Event, ok bool) {
	c := &o.cur
	t := &o.t[c.tidx]
	now := ev.Now
	switch t.kind {
	case kReq:
		switch {
		case c.tstate == tsRunning && (ok || c.terminal):
			o.failf("cancel-running", now, "Cancel ended granted request %s", tname(ev.Ticket))
		case c.tstate == tsWaiting && ev.Reason == core.ReasonDisconnect && !ok:
			o.failf("disconnect-kept", now, "disconnect of waiting request %s did not end it", tname(ev.Ticket))
		case ok != c.terminal:
			o.failf("cancel-result", now, "Cancel(%s, %s) returned %v, terminal effect %v", tname(ev.Ticket), ev.Reason, ok, c.terminal)
		}
	case kMgr:
		if ok != c.terminal {
			o.failf("cancel-result", now, "Cancel(%s, %s) of a manager returned %v, terminal effect %v", tname(ev.Ticket), ev.Reason, ok, c.terminal)
		}
	case kBulk:
		if ok != (ev.Reason == core.ReasonDisconnect) {
			o.failf("cancel-result", now, "Cancel(%s, %s) of a bulk returned %v", tname(ev.Ticket), ev.Reason, ok)
		}
	}
}

// postBulk checks that a bulk unload published every member's barrier in
// its one step (CONTRACT.md "Operations crossed with model states": bulk
// publishes per-model barriers in one short transaction): each selected
// model has one more queued manager, or its barrier was granted at once
// (an idle ready model starts unloading, an unloaded one stays unloaded).
func (o *oracle) postBulk(ev *core.Event, tk core.Ticket) {
	c := &o.cur
	if o.shutdown {
		return
	}
	for k, h := range c.bulkIDs {
		b, a := c.bulkBefore[k], o.barriers(h)
		switch {
		case a.queued == b.queued+1:
		case b.queued == 0 && a.queued == 0 && (a.state == core.Unloaded || (b.state == core.Ready && a.state == core.Unloading)):
		default:
			o.failf("bulk-barrier", ev.Now, "bulk %s: %s has %d queued managers (%s), had %d (%s): its barrier is missing",
				tname(tk), o.m.ID(h), a.queued, a.state, b.queued, b.state)
			return
		}
	}
}

// postGlobal checks what must hold after every event.
func (o *oracle) postGlobal(now int64) {
	for _, h := range o.pendingUnload {
		if o.m.Status(h).Loaded {
			o.failf("unload-loaded", now, "%s: unload answered while the model is loaded", o.m.ID(h))
		}
	}
	o.pendingUnload = o.pendingUnload[:0]
	for _, u := range o.unregs {
		h := core.Handle(u.id)
		if _, ok := o.m.Lookup(o.m.ID(h)); ok || o.m.Status(h).Loaded {
			o.failf("unregister-left-model", now, "%s: unregister answered while the model is still registered or loaded", o.m.ID(h))
		}
		if md := o.model(h); md.waiting != 0 || md.running != 0 {
			o.failf("unregister-left-tickets", now, "%s: %d tickets still wait and %d run after its unregister",
				o.m.ID(h), md.waiting, md.running)
		}
	}
	o.unregs = o.unregs[:0]
	if o.fail != nil {
		return
	}
	// LiveTickets also counts a bulk's internal member barriers, which no
	// client sees; compare only while no bulk is live.
	if n := o.m.LiveTickets(); n != o.live && o.bulks == 0 {
		o.failf("live-tickets", now, "core holds %d live tickets, clients wait on %d", n, o.live)
		return
	}
	if n := o.m.JobsInFlight(); n != o.jobs {
		o.failf("jobs-in-flight", now, "core waits for %d jobs, the engine runs %d", n, o.jobs)
		return
	}
	if n, mb := o.m.Residency(); n != o.physN || mb != o.physMB {
		o.failf("residency-ledger", now, "core charges %d models/%dMB, the engine holds %d/%dMB", n, mb, o.physN, o.physMB)
		return
	}
	if lim := o.opts.MaxLoadedModels; lim > 0 && o.physN > lim {
		o.failf("residency-engine", now, "the engine holds %d models, limit %d", o.physN, lim)
		return
	}
	if b := o.opts.MemoryBudgetMB; b > 0 && o.physMB > b {
		o.failf("residency-engine", now, "the engine holds %dMB, budget %dMB", o.physMB, b)
		return
	}
	if o.complete && (o.live != 0 || o.jobs != 0 || o.physN != 0) {
		o.failf("shutdown-complete", now, "after ShutdownComplete: %d tickets, %d jobs, %d resident models", o.live, o.jobs, o.physN)
	}
}

// barrierView is what postBulk compares before and after a bulk unload.
type barrierView struct {
	queued int
	state  core.State
}

// behindUnregister reports whether ticket t of a registered model was
// submitted after an unregister of that model that answered Done in the
// current event: the tombstone answers it not_found (CONTRACT.md
// unreg.404-after).
func (o *oracle) behindUnregister(t *tinfo) bool {
	for _, u := range o.unregs {
		if core.Handle(u.id) == t.h && t.seq > u.seq {
			return true
		}
	}
	return false
}
