package core

import (
	"fmt"
	"math"
	"math/bits"
)

// SubmitRequest is the action SubmitRequest: an inference request for model h
// enters the scheduler at time now. timeout overrides the model's admission
// timeout in nanoseconds (NoTimeout for the default, 0 for unbounded); the
// server ceiling still bounds it. The returned ticket ends with a Grant
// (then Release) or a Reject.
//
// Decision tree (CONTRACT.md order.request-then-request,
// order.manager-then-request, time.queue-limit, time.overdue-blockers):
//
//	(1) shutting down: Reject shutting_down.
//	(2) nothing queued, no manager, a spare slot: admit now; on a ready
//	    model that is a Grant, otherwise the request waits for the pool and
//	    an unloaded model starts loading.
//	(3) queue limit reached: Reject server_busy.
//	(4) bounded wait and every occupied slot is overdue: Reject server_busy.
//	(5) queue FIFO behind everything earlier, with a deadline.
func (m *Machine) SubmitRequest(now int64, h Handle, timeout int64) Ticket {
	if int(h) >= len(m.models) {
		return m.rejectUnknown(now)
	}
	m.why = RejectOther
	md := &m.models[h]
	// (2), the hot path: a warm model with a spare slot and nothing queued.
	if md.head < 0 && md.mgr < 0 && md.state == Ready && md.active < md.cfg.Slots && !m.shutdown {
		i := m.ts.alloc()
		t := &m.ts.t[i]
		t.kind, t.model, t.parent, t.since = tkRequest, h, -1, now
		m.seq++
		t.seq = m.seq
		return m.grantSlot(md, i, t)
	}
	return m.submitRequestSlow(now, h, timeout)
}

func (m *Machine) submitRequestSlow(now int64, h Handle, timeout int64) Ticket {
	md := &m.models[h]
	i := m.ts.alloc()
	t := &m.ts.t[i]
	t.kind, t.model, t.parent, t.since, t.prev, t.next = tkRequest, h, -1, now, -1, -1
	id := m.ts.id(i)
	m.submitted = id
	if m.shutdown { // (1)
		m.seq++
		t.seq = m.seq
		m.finish(i, EfReject, CodeShuttingDown)
		return id
	}
	if md.gone { // a handle resolved before its model was unregistered
		m.seq++
		t.seq, t.model = m.seq, NoModel
		m.finish(i, EfReject, CodeNotFound)
		return id
	}
	barrier := md.head >= 0
	if m.mut(MutBarge) {
		barrier = md.nReq > 0
	}
	if !barrier && md.mgr < 0 && admittable(md) && md.active < md.cfg.Slots { // (2)
		m.seq++
		t.seq = m.seq
		m.admit(now, h, i)
		m.settle(now)
		return id
	}
	if md.cfg.MaxQueue > 0 && md.nReq >= md.cfg.MaxQueue { // (3)
		m.seq++
		t.seq = m.seq
		m.finish(i, EfReject, CodeServerBusy)
		return id
	}
	d := m.effectiveTimeout(md, timeout)
	if d > 0 && m.allOverdue(now, md, d) { // (4)
		m.seq++
		t.seq = m.seq
		m.finish(i, EfReject, CodeServerBusy)
		return id
	}
	if d > 0 {
		t.dead = deadline(now, d)
	}
	m.enqueue(h, i) // (5)
	return id
}

// admittable reports whether a model's state lets requests take slots: the
// pool is published, or it is being built (or will be) for requests.
func admittable(md *model) bool {
	return md.state == Ready || md.state == Unloaded || (md.state == Loading && md.mgr < 0)
}

// grantSlot gives request i a free slot of a ready model, emits the Grant
// and returns the request's ticket.
func (m *Machine) grantSlot(md *model, i int32, t *ticket) Ticket {
	s := bits.TrailingZeros16(^md.busy)
	md.busy |= 1 << (s & 15)
	md.slotT[s] = i
	md.active++
	t.slot, t.phase, t.version = int8(s), phRunning, md.poolVersion
	// Written in place, field by field: a composite literal is built on
	// the stack and copied in 16-byte moves that stall on its narrower
	// stores (about a fifth of the hot path's time).
	id := m.ts.id(i)
	e := m.next()
	e.Kind, e.Model, e.Slot, e.Ticket, e.Version = EfGrant, t.model, int32(s), id, md.poolVersion
	return id
}

// next appends a zero effect to the output and returns it to be filled in.
func (m *Machine) next() *Effect {
	n := len(m.out)
	if n == cap(m.out) {
		m.out = append(m.out, Effect{})
	} else {
		m.out = m.out[:n+1]
		m.out[n] = Effect{}
	}
	return &m.out[n]
}

// admit gives request i a slot. On a ready pool it is granted; otherwise it
// waits for the pool, and an unloaded model starts its one cold load
// (CONTRACT.md phase.executing, phase.waiting-init, state.unloaded).
func (m *Machine) admit(now int64, h Handle, i int32) {
	md := &m.models[h]
	t := &m.ts.t[i]
	t.since, t.dead = now, 0
	if md.state == Ready {
		m.grantSlot(md, i, t)
		return
	}
	if md.state == Unloaded {
		// A load would start: not while the model backs off after a
		// failed load (CONTRACT.md fail.load-backoff).
		if on, left := backingOff(md, now); on {
			m.emit(Effect{Kind: EfReject, Code: CodeServerBusy, Model: h, Ticket: m.ts.id(i), RetryAfter: left})
			m.ts.release(i)
			return
		}
	}
	s := bits.TrailingZeros16(^md.busy)
	md.busy |= 1 << (s & 15)
	md.slotT[s] = i
	md.active++
	md.waitInit++
	t.slot, t.phase = int8(s), phWaitInit
	m.touch(h) // a slot taken while the pool is built: no effect names it yet
	if md.state == Unloaded {
		m.startLoad(h)
	}
}

// effectiveTimeout applies the request override, the model's and the server's
// default, and the server ceiling (CONTRACT.md time.timeout-precedence,
// time.zero-and-bulk). 0 means unbounded.
func (m *Machine) effectiveTimeout(md *model, override int64) int64 {
	d := override
	if d < 0 {
		d = md.cfg.AdmissionTimeout
		if d < 0 {
			d = m.opts.DefaultAdmissionTimeout
		}
	}
	if c := m.opts.AdmissionCeiling; c > 0 && (d == 0 || d > c) {
		d = c
	}
	return d
}

// deadline is now+d, saturated so that an override the caller did not bound
// cannot wrap into the past (the server bounds every timeout it accepts to
// MaxTimeout; CONTRACT.md fail.spec-bounds).
func deadline(now, d int64) int64 {
	if d > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + d
}

// allOverdue reports whether the model has occupied slots and every one of
// them has been held at least d: waiting behind them is pointless, so a
// bounded waiter fails fast (CONTRACT.md time.overdue-blockers).
func (m *Machine) allOverdue(now int64, md *model, d int64) bool {
	if md.active == 0 {
		return false
	}
	for b := md.busy; b != 0; b &= b - 1 {
		s := bits.TrailingZeros16(b)
		if now-m.ts.t[md.slotT[s]].since < d {
			return false
		}
	}
	return true
}

// pump admits from the head of a model's FIFO while the contract allows:
// requests take spare slots in order; a manager at the head waits until the
// model is settled (no leases, no backend step) and then runs exclusively;
// nothing behind a waiting manager moves (CONTRACT.md
// order.request-then-request, order.request-then-manager,
// order.manager-then-request, order.manager-then-manager).
func (m *Machine) pump(now int64, h Handle) {
	md := &m.models[h]
	for md.head >= 0 {
		i := md.head
		if m.mut(MutLIFO) && m.ts.t[i].kind == tkRequest {
			i = md.tail
			if m.ts.t[i].kind != tkRequest {
				i = md.head
			}
		}
		t := &m.ts.t[i]
		if t.kind == tkRequest {
			if md.mgr >= 0 || !admittable(md) || md.active >= md.cfg.Slots {
				return
			}
			m.unlink(i)
			m.admit(now, h, i)
			continue
		}
		exclusive := md.active == 0
		if m.mut(MutManagerOverlap) {
			exclusive = true
		}
		if md.mgr >= 0 || !exclusive || md.jkind != jobNone || md.inLoaders ||
			(md.state != Unloaded && md.state != Ready) {
			if m.mut(MutBarge) && md.mgr < 0 && md.state == Ready {
				m.bargeBehind(now, h, i)
			}
			return
		}
		m.unlink(i)
		m.grantManager(now, h, i)
		if md.mgr >= 0 {
			return
		}
	}
}

// bargeBehind is MutBarge: requests queued behind a waiting manager take spare
// slots.
func (m *Machine) bargeBehind(now int64, h Handle, mi int32) {
	md := &m.models[h]
	for j := m.ts.t[mi].next; j >= 0 && md.active < md.cfg.Slots; {
		nx := m.ts.t[j].next
		if m.ts.t[j].kind == tkRequest {
			m.unlink(j)
			m.admit(now, h, j)
		}
		j = nx
	}
}

// Release is the action Release: the request's lease ends (its answer was
// written, failed, or its stream was dropped). failed records an inference
// failure; the lease is released either way.
func (m *Machine) Release(now int64, id Ticket, failed bool) error {
	i := m.ts.lookup(id)
	if i < 0 {
		if m.mut(MutDoubleRelease) {
			return m.releaseTwice(now, id)
		}
		return fmt.Errorf("%w: %d", ErrUnknownTicket, id)
	}
	t := &m.ts.t[i]
	if t.kind != tkRequest || t.phase != phRunning {
		return fmt.Errorf("%w: %d", ErrNotRunning, id)
	}
	m.begin(RejectOther)
	h := t.model
	md := &m.models[h]
	md.busy &^= 1 << (t.slot & 15)
	md.active--
	md.lastUsed = now
	m.ts.release(i)
	m.touch(h)
	if md.head >= 0 || m.shutdown || md.state != Ready {
		m.markDirty(h)
		m.settle(now)
	}
	return nil
}

// releaseTwice is MutDoubleRelease: a stale ticket's slot is released again.
func (m *Machine) releaseTwice(now int64, id Ticket) error {
	i := int32(uint32(id))
	if i < 0 || int(i) >= len(m.ts.t) {
		return fmt.Errorf("%w: %d", ErrUnknownTicket, id)
	}
	for h := range m.models {
		md := &m.models[h]
		if md.active > 0 {
			md.active--
			m.markDirty(Handle(h))
			m.settle(now)
			return nil
		}
	}
	return fmt.Errorf("%w: %d", ErrUnknownTicket, id)
}

// Cancel is the action Cancel: the ticket's admission deadline passed
// (ReasonTimeout) or its client went away (ReasonDisconnect). It reports
// whether the cancellation took effect: the ticket ended, or, for a bulk
// unload, its queued barriers were withdrawn (the bulk then ends, rejected
// as cancelled, when its running members finish). A queued ticket leaves the queue at once holding
// nothing (timeout: server_busy). A request admitted but still waiting for
// the pool gives its slot back on disconnect; a timeout no longer applies to
// it. A granted request or manager is not cancelled: the shell releases the
// request, and the manager runs to completion. A disconnected bulk unload
// withdraws its queued barriers; members already running finish
// (CONTRACT.md time.disconnect-queued, time.disconnect-waiting-init,
// time.manager-timeout, order.bulk-cancel).
func (m *Machine) Cancel(now int64, id Ticket, r Reason) (bool, error) {
	i := m.ts.lookup(id)
	if i < 0 {
		return false, fmt.Errorf("%w: %d", ErrUnknownTicket, id)
	}
	t := &m.ts.t[i]
	h := t.model
	code := CodeCancelled
	m.begin(RejectDisconnect)
	if r == ReasonTimeout {
		code = CodeServerBusy
		m.why = RejectTimeout
	}
	switch t.phase {
	case phQueued:
		m.unlink(i)
		if m.mut(MutTimeoutLeak) && r == ReasonTimeout {
			t.phase = phRunning // left behind: no queue, no slot, never released
			return true, nil
		}
		m.finish(i, EfReject, code)
		m.markDirty(h)
	case phWaitInit:
		if r != ReasonDisconnect {
			return false, nil
		}
		md := &m.models[h]
		md.busy &^= 1 << (t.slot & 15)
		md.active--
		md.waitInit--
		m.finish(i, EfReject, code)
		// A queued request takes the freed slot and the pending load with it,
		// so the load keeps its place in the loader queue; only a load that
		// nobody waits for any more is withdrawn.
		m.pump(now, h)
		if md.waitInit == 0 && md.mgr < 0 && md.inLoaders {
			m.withdrawLoad(h)
		}
		m.markDirty(h)
	case phBulk:
		if r != ReasonDisconnect {
			return false, nil
		}
		m.cancelBulk(i, ReasonDisconnect)
	default:
		return false, nil
	}
	m.settle(now)
	return true, nil
}

// rejectUnknown answers a request for an unknown model.
func (m *Machine) rejectUnknown(now int64) Ticket {
	i := m.ts.alloc()
	t := &m.ts.t[i]
	t.kind, t.parent, t.since, t.prev, t.next, t.model = tkRequest, -1, now, -1, -1, NoModel
	id := m.ts.id(i)
	m.begin(RejectOther)
	m.submitted = id
	code := CodeNotFound
	if m.shutdown {
		code = CodeShuttingDown
	}
	m.finish(i, EfReject, code)
	return id
}

// Tick is the action Tick: time passed. Queued tickets whose admission
// deadline passed are rejected with server_busy, load backoffs that ended
// are forgotten, and ready models idle and queue-free for
// Options.IdleTimeout retire (CONTRACT.md time.admission-timeout,
// fail.load-backoff, res.idle-retirement).
func (m *Machine) Tick(now int64) {
	m.begin(RejectTimeout)
	for h := range m.models {
		md := &m.models[h]
		for i := md.head; i >= 0; {
			t := &m.ts.t[i]
			nx := t.next
			if t.dead > 0 && t.dead <= now && t.kind != tkBulk && t.parent < 0 {
				m.unlink(i)
				m.finish(i, EfReject, CodeServerBusy)
				m.markDirty(Handle(h))
			}
			i = nx
		}
	}
	for h := range m.models {
		if md := &m.models[h]; md.backoffUntil != 0 && md.backoffUntil <= now {
			md.backoffUntil = 0 // the backoff is over: the next request loads
			m.markDirty(Handle(h))
		}
	}
	if d := m.opts.IdleTimeout; d > 0 && !m.shutdown {
		for h := range m.models {
			md := &m.models[h]
			if md.evictable() && now-md.lastUsed >= d {
				m.retire(Handle(h), CauseIdle)
			}
		}
	}
	m.settle(now)
}

// NextDeadline returns the earliest time at which Tick has work (an
// admission deadline, an idle retirement or the end of a load backoff), or
// 0 when there is none.
func (m *Machine) NextDeadline() int64 {
	var next int64
	take := func(t int64) {
		if t > 0 && (next == 0 || t < next) {
			next = t
		}
	}
	for h := range m.models {
		md := &m.models[h]
		for i := md.head; i >= 0; i = m.ts.t[i].next {
			if m.ts.t[i].parent < 0 {
				take(m.ts.t[i].dead)
			}
		}
		if d := m.opts.IdleTimeout; d > 0 && !m.shutdown && md.evictable() {
			take(md.lastUsed + d)
		}
		take(md.backoffUntil)
	}
	return next
}

// Deadline returns the admission deadline of a queued ticket (0 for none, or
// when the ticket is not queued), so the shell arms its timer from the
// machine's own computation instead of repeating it.
func (m *Machine) Deadline(id Ticket) int64 {
	i := m.ts.lookup(id)
	if i < 0 || m.ts.t[i].phase != phQueued {
		return 0
	}
	return m.ts.t[i].dead
}
