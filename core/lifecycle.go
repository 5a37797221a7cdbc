package core

import "math"

// startLoad puts a model on the loader queue: it becomes Loading and starts
// when the residency ledger and the cold-load guard allow (CONTRACT.md
// state.loading, res.loader-fifo, res.cold-guard).
func (m *Machine) startLoad(h Handle) {
	md := &m.models[h]
	md.state = Loading
	md.inLoaders = true
	m.loaders = append(m.loaders, h)
	m.loadersD = true
}

// withdrawLoad removes a load nobody waits for any more from the loader
// queue before it started.
func (m *Machine) withdrawLoad(h Handle) {
	md := &m.models[h]
	for k, x := range m.loaders {
		if x == h {
			m.loaders = append(m.loaders[:k], m.loaders[k+1:]...)
			break
		}
	}
	md.inLoaders = false
	md.state = Unloaded
	m.loadersD = true
}

// fits reports whether a model of mb megabytes can become resident now, or,
// with afterRetiring, once the pools already tearing down are gone.
func (m *Machine) fits(mb int64, afterRetiring bool) bool {
	count, used := m.resCount, m.resMB
	if afterRetiring {
		for h := range m.models {
			md := &m.models[h]
			if md.resident && md.jkind == jobTeardown {
				count--
				used -= md.resMB
			}
		}
	}
	if m.mut(MutResidencyOverflow) {
		return true
	}
	return m.room(count, used, mb)
}

// room reports whether one more pool of mb megabytes fits a ledger of count
// models and used megabytes. The arithmetic is checked: it compares against
// what is left (b-used) instead of summing, and refuses a size that would
// wrap the ledger even without a budget, so a huge estimate can never make
// the total negative and fit (CONTRACT.md res.ledger-bounds).
func (m *Machine) room(count int, used, mb int64) bool {
	if n := m.opts.MaxLoadedModels; n > 0 && count >= n {
		return false
	}
	if mb < 0 || used < 0 || mb > math.MaxInt64-used {
		return false
	}
	if b := m.opts.MemoryBudgetMB; b > 0 && mb > b-used {
		return false
	}
	return true
}

// pumpLoaders starts queued loads in FIFO order while they fit (CONTRACT.md,
// "Residency"):
//
//	(1) the cold-load guard admits one load at a time when enabled;
//	(2) the head starts when it fits the ledger now;
//	(3) it waits when pools already tearing down will make it fit;
//	(4) otherwise it evicts least-recently-used idle, queue-free ready
//	    models until it will fit, and waits for their teardown;
//	(5) with no such victims its load is refused: 503 server_busy.
//
// Only the head evicts, so two loaders never pick the same victim, and every
// teardown re-runs this pump, so no wakeup is lost.
func (m *Machine) pumpLoaders(now int64) {
	for len(m.loaders) > 0 {
		if m.opts.SerializeColdLoads && m.loads > 0 { // (1)
			return
		}
		h := m.loaders[0]
		md := &m.models[h]
		mb := md.cfg.MemoryMB
		if m.fits(mb, false) { // (2)
			m.loaders = m.loaders[1:]
			md.inLoaders = false
			md.resident, md.resMB = true, mb
			m.resCount++
			m.resMB += mb
			m.loads++
			md.built, md.capacity = 0, 0
			j := m.newJob(h, jobLoad)
			m.emit(Effect{Kind: EfStartLoad, Model: h, Job: j, Version: md.version, Config: md.cfg})
			continue
		}
		if m.fits(mb, true) { // (3)
			return
		}
		if m.evictFor(h, mb) { // (4)
			return
		}
		m.loaders = m.loaders[1:] // (5)
		md.inLoaders = false
		m.failLoad(now, h, CodeServerBusy, 0)
	}
}

// evictFor picks victims for loader h until it would fit once they are torn
// down, and retires them. It retires nothing and reports false when even all
// candidates would not make room (CONTRACT.md res.victim-choice,
// res.no-victim, fail.residency-refusal).
func (m *Machine) evictFor(h Handle, mb int64) bool {
	count, used := m.resCount, m.resMB
	for x := range m.models {
		md := &m.models[x]
		if md.resident && md.jkind == jobTeardown { // unload, eviction or a reconfigure's old pool
			count--
			used -= md.resMB
		}
	}
	ok := func() bool { return m.room(count, used, mb) }
	var picked []Handle
	taken := func(x Handle) bool {
		for _, p := range picked {
			if p == x {
				return true
			}
		}
		return false
	}
	for !ok() {
		best := -1
		for x := range m.models {
			md := &m.models[x]
			if Handle(x) == h || taken(Handle(x)) || !md.resident {
				continue
			}
			if !md.evictable() && !(m.mut(MutEvictBusy) && md.state == Ready) {
				continue
			}
			if best < 0 || md.lastUsed < m.models[best].lastUsed {
				best = x
			}
		}
		if best < 0 {
			return false
		}
		picked = append(picked, Handle(best))
		count--
		used -= m.models[best].resMB
	}
	for _, v := range picked {
		m.retire(v, CauseEvict)
	}
	return true
}

// LoadDone is the action LoadDone: the primary session opened with the
// advertised capacity, or failed. A capacity below the configured slots fails
// the load as invalid_request and never publishes a pool.
func (m *Machine) LoadDone(now int64, j Job, capacity int, failed bool) error {
	md, h, err := m.jobModel(j, jobLoad)
	if err != nil {
		return err
	}
	m.begin(RejectOther)
	switch {
	case failed:
		m.failLoad(now, h, CodeBackend, 0)
	case capacity < md.cfg.Slots:
		md.capacity = capacity
		m.failLoad(now, h, CodeInvalid, 1)
	default:
		md.capacity = capacity
		md.built = 1
		m.nextClone(now, h)
	}
	m.settle(now)
	return nil
}

// CloneDone is the action CloneDone: one more private session exists, or the
// clone failed and the private pool is torn down whole.
func (m *Machine) CloneDone(now int64, j Job, failed bool) error {
	md, h, err := m.jobModel(j, jobClone)
	if err != nil {
		return err
	}
	m.begin(RejectOther)
	if failed {
		m.failLoad(now, h, CodeBackend, md.built)
	} else {
		md.built++
		m.nextClone(now, h)
	}
	m.settle(now)
	return nil
}

// nextClone asks for the next session, or publishes a complete pool.
func (m *Machine) nextClone(now int64, h Handle) {
	md := &m.models[h]
	if md.built < md.cfg.Slots && !m.mut(MutPartialPool) {
		j := m.newJob(h, jobClone)
		m.emit(Effect{Kind: EfStartClone, Model: h, Job: j, Version: md.version, Index: int32(md.built)})
		return
	}
	m.publish(now, h)
}

// publish makes the complete pool serve: the waiting admitted requests are
// granted and a managing load finishes (CONTRACT.md state.ready,
// phase.waiting-init).
func (m *Machine) publish(now int64, h Handle) {
	md := &m.models[h]
	m.loads--
	m.loadersD = true
	md.state = Ready
	md.published = true
	md.sessions = md.built
	if !m.mut(MutStaleMetadata) || md.poolVersion == 0 {
		md.poolVersion = md.version
	}
	md.lastUsed = now
	endBackoff(md)
	m.emit(Effect{Kind: EfPublish, Model: h, Version: md.poolVersion, Sessions: int32(md.sessions), Capacity: int32(md.capacity)})
	for b := md.busy; b != 0; b &= b - 1 {
		s := trailing(b)
		i := md.slotT[s]
		t := &m.ts.t[i]
		if t.phase == phWaitInit {
			t.phase, t.version = phRunning, md.poolVersion
			md.waitInit--
			m.emit(Effect{Kind: EfGrant, Model: h, Slot: int32(s), Ticket: m.ts.id(i), Version: md.poolVersion})
		}
	}
	if md.mgr >= 0 && md.step == msLoad {
		m.managerDone(h, EfDone, CodeOK)
	}
	m.markDirty(h)
}

// failLoad ends a load that did not publish: the requests waiting for it and
// its manager are rejected with code; private sessions (if any) are torn down
// before the model is unloaded again. Queued requests then retry the load
// (CONTRACT.md fail.initial-load, reg.first-load-failure).
func (m *Machine) failLoad(now int64, h Handle, code Code, private int) {
	md := &m.models[h]
	if md.resident { // the load had started
		m.loads--
	}
	if code == CodeBackend || code == CodeInvalid { // the config did not load (not a residency refusal)
		m.backOff(now, md)
	}
	m.loadersD = true
	md.capacity, md.built = 0, 0
	why := m.why
	m.why = RejectLoadFailed
	if code == CodeServerBusy {
		m.why = RejectNoRoom
	}
	for b := md.busy; b != 0; b &= b - 1 {
		s := trailing(b)
		i := md.slotT[s]
		if m.ts.t[i].phase == phWaitInit {
			md.busy &^= 1 << s
			md.active--
			md.waitInit--
			m.finish(i, EfReject, code)
		}
	}
	if private > 0 {
		// A manager keeps its exclusive ownership until the private sessions
		// are gone, so its answer finds the model unloaded (cell
		// reg.first-load-failure); waiting requests are answered at once.
		if md.mgr >= 0 {
			md.step, md.fail = msFailTeardown, code
		}
		md.state = Unloading
		md.cause = CauseFailedLoad
		j := m.newJob(h, jobTeardown)
		m.emit(Effect{Kind: EfStartTeardown, Model: h, Job: j, Version: md.version, Sessions: int32(private), Cause: CauseFailedLoad})
	} else {
		if md.mgr >= 0 {
			m.managerDone(h, EfReject, code)
		}
		m.unresident(h)
		md.state = Unloaded
	}
	m.why = why
	if !m.mut(MutLostWakeup) {
		m.markDirty(h)
	}
}

// backOff counts a failed load and starts its backoff: LoadBackoff after the
// first failure, doubling with each further one up to LoadBackoffMax
// (CONTRACT.md fail.load-backoff).
func (m *Machine) backOff(now int64, md *model) {
	md.loadFails++
	base := m.opts.LoadBackoff
	if base <= 0 {
		return
	}
	d, ceil := base, max(m.opts.LoadBackoffMax, base)
	for k := 1; k < md.loadFails && d < ceil; k++ {
		d *= 2 // both are at most MaxTimeout: no overflow
	}
	md.backoffUntil = deadline(now, min(d, ceil))
}

// endBackoff forgets the failures of a model: its load succeeded or a
// manager took it over.
func endBackoff(md *model) { md.loadFails, md.backoffUntil = 0, 0 }

// backingOff reports whether a load of md may not start, and for how much
// longer (at least 1 ns). The backoff lasts until the first Tick at or
// after its end forgets it (NextDeadline names that time, and the shell
// ticks then), so whether a request is refused depends on events only.
func backingOff(md *model, now int64) (bool, int64) {
	if md.backoffUntil == 0 {
		return false, 0
	}
	return true, max(md.backoffUntil-now, 1)
}

// retire clears a published pool's logical residency (loaded=false, no
// capacity) and starts its teardown. Memory stays charged until
// TeardownDone: logical retirement is not free memory (CONTRACT.md
// res.retiring-counts, fail.slow-teardown).
func (m *Machine) retire(h Handle, cause Cause) {
	md := &m.models[h]
	if cause == CauseEvict || cause == CauseIdle {
		m.evicted = append(m.evicted, evictRecord{model: h, active: md.active, queued: md.nReq + md.nMgr,
			mgr: md.mgr >= 0, published: md.published})
	}
	n := md.sessions
	md.state = Unloading
	md.published = false
	md.capacity, md.sessions, md.built = 0, 0, 0
	md.cause = cause
	if m.mut(MutRetiredIsFree) {
		m.unresident(h)
	}
	m.emit(Effect{Kind: EfRetire, Model: h, Version: md.poolVersion, Sessions: int32(n), Cause: cause})
	j := m.newJob(h, jobTeardown)
	m.emit(Effect{Kind: EfStartTeardown, Model: h, Job: j, Version: md.poolVersion, Sessions: int32(n), Cause: cause})
}

func (m *Machine) unresident(h Handle) {
	md := &m.models[h]
	if md.resident {
		md.resident = false
		m.resCount--
		m.resMB -= md.resMB
		md.resMB = 0
		m.loadersD = true
	}
}

// TeardownDone is the action TeardownDone: a pool is gone and its memory is
// free. The manager that asked for it goes on: an unload finishes, a
// reconfigure commits the new config and loads it.
func (m *Machine) TeardownDone(now int64, j Job) error {
	md, h, err := m.jobModel(j, jobTeardown)
	if err != nil {
		return err
	}
	m.begin(RejectOther)
	m.unresident(h)
	md.state = Unloaded
	md.cause = CauseNone
	if md.mgr >= 0 {
		switch md.step {
		case msUnload:
			m.managerDone(h, EfDone, CodeOK)
		case msUnregister:
			m.managerDone(h, EfDone, CodeOK)
			m.tombstone(h)
		case msFailTeardown:
			m.why = RejectLoadFailed
			m.managerDone(h, EfReject, md.fail)
			m.why = RejectOther
		case msTeardownOld:
			cfg := md.pend
			md.pend = nil
			m.commit(h, cfg)
			md.step = msLoad
			m.startLoad(h)
			md.state = Reconfiguring
		}
	}
	m.markDirty(h)
	m.settle(now)
	return nil
}

// shutdownRetire tears down a settled ready model once the machine is
// shutting down.
func (m *Machine) shutdownRetire(now int64, h Handle) {
	md := &m.models[h]
	if md.settled() && md.state == Ready && md.head < 0 {
		m.retire(h, CauseShutdown)
	}
}

// BeginShutdown is the action BeginShutdown: stop admitting. Every queued
// ticket is rejected with shutting_down at once; admitted requests, granted
// managers and their loads finish; then every pool is torn down and
// ShutdownComplete follows. Repeating it changes nothing (CONTRACT.md
// state.shutting-down, time.shutdown-queued, time.shutdown-manager,
// time.shutdown-cold-load, time.shutdown-second-signal).
func (m *Machine) BeginShutdown(now int64) {
	if m.shutdown {
		return
	}
	m.begin(RejectShutdown)
	m.shutdown = true
	for h := range m.models {
		md := &m.models[h]
		for i := md.head; i >= 0; {
			t := &m.ts.t[i]
			nx := t.next
			m.unlink(i)
			if t.parent >= 0 {
				p := t.parent
				if m.ts.t[p].reason == 0 {
					m.ts.t[p].reason = reasonShutdown
				}
				m.dropLater(p)
			}
			m.finish(i, EfReject, CodeShuttingDown)
			i = nx
		}
		m.markDirty(Handle(h))
	}
	m.settle(now)
}

func trailing(b uint16) int {
	n := 0
	for b&1 == 0 {
		b >>= 1
		n++
	}
	return n
}
