package core

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Invariant is one named predicate over the whole machine. The names are the
// invariants of spec/Scheduler.tla.
type Invariant struct {
	Name  string
	Check func(m *Machine) error
}

var invariants = [...]Invariant{
	{"CapacityBounds", checkCapacityBounds},
	{"ManagerExclusivity", checkManagerExclusivity},
	{"NoBarging", checkNoBarging},
	{"FIFOAdmission", checkFIFOAdmission},
	{"NoPartialPool", checkNoPartialPool},
	{"MetadataConsistent", checkMetadataConsistent},
	{"ResidencyLimit", checkResidencyLimit},
	{"LedgerBounds", checkLedgerBounds},
	{"EvictOnlyIdle", checkEvictOnlyIdle},
	{"LeaseConservation", checkLeaseConservation},
	{"QueueProgress", checkQueueProgress},
	{"TombstoneEmpty", checkTombstoneEmpty},
}

// Invariants lists every invariant of the contract. The model checker, the
// rapid tests, the simulator and the conformance suite all check these. It returns a
// copy: the list itself cannot be changed.
func Invariants() []Invariant { return append([]Invariant(nil), invariants[:]...) }

// NumInvariants is len(Invariants()), without the copy.
const NumInvariants = len(invariants)

// InvariantNames lists the invariant names in order.
func InvariantNames() []string {
	out := make([]string, len(invariants))
	for k, inv := range invariants {
		out[k] = inv.Name
	}
	return out
}

// InvariantError is a broken invariant with the values that broke it.
type InvariantError struct {
	Name   string
	Detail string
}

func (e *InvariantError) Error() string { return e.Name + ": " + e.Detail }

// CheckInvariants checks every invariant and returns all violations joined,
// each an *InvariantError, or nil.
func (m *Machine) CheckInvariants() error {
	var errs []error
	for _, inv := range invariants {
		if err := inv.Check(m); err != nil {
			errs = append(errs, &InvariantError{Name: inv.Name, Detail: err.Error()})
		}
	}
	return errors.Join(errs...)
}

// CapacityBounds: slot counts are 1..16; admitted requests never exceed the
// configured slots; the slot bitmap and the counters agree.
func checkCapacityBounds(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		switch {
		case md.cfg.Slots < 1 || md.cfg.Slots > MaxSlots:
			return fmt.Errorf("%s: slots=%d", md.id, md.cfg.Slots)
		case md.active < 0 || md.active > md.cfg.Slots:
			return fmt.Errorf("%s: active=%d slots=%d", md.id, md.active, md.cfg.Slots)
		case bits.OnesCount16(md.busy) != md.active:
			return fmt.Errorf("%s: %d slots marked busy, active=%d", md.id, bits.OnesCount16(md.busy), md.active)
		case md.waitInit < 0 || md.waitInit > md.active:
			return fmt.Errorf("%s: wait_init=%d active=%d", md.id, md.waitInit, md.active)
		case md.published && md.capacity < md.sessions:
			return fmt.Errorf("%s: %d sessions on capacity %d", md.id, md.sessions, md.capacity)
		}
	}
	return nil
}

// ManagerExclusivity: a granted manager owns its model alone: no request
// holds a slot meanwhile.
func checkManagerExclusivity(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		if md.mgr >= 0 {
			t := &m.ts.t[md.mgr]
			if md.active != 0 {
				return fmt.Errorf("%s: manager %s granted with %d active requests", md.id, t.op, md.active)
			}
			if t.phase != phManaging || t.model != Handle(h) {
				return fmt.Errorf("%s: manager ticket in phase %s", md.id, phaseNames[t.phase])
			}
		}
		if md.active > 0 && md.state != Ready && md.state != Loading {
			return fmt.Errorf("%s: %d active requests in state %s", md.id, md.active, md.state)
		}
	}
	return nil
}

// NoBarging: no admitted request entered the FIFO after a manager that is
// still waiting in it.
func checkNoBarging(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		for i := md.head; i >= 0; i = m.ts.t[i].next {
			q := &m.ts.t[i]
			if q.kind != tkManager {
				continue
			}
			for b := md.busy; b != 0; b &= b - 1 {
				if r := &m.ts.t[md.slotT[trailing(b)]]; r.seq > q.seq {
					return fmt.Errorf("%s: request #%d admitted past waiting manager #%d", md.id, r.seq, q.seq)
				}
			}
		}
	}
	return nil
}

// FIFOAdmission: the FIFO is in arrival order and every admitted request
// arrived before every request still queued.
func checkFIFOAdmission(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		var last uint64
		for i := md.head; i >= 0; i = m.ts.t[i].next {
			q := &m.ts.t[i]
			if q.seq <= last {
				return fmt.Errorf("%s: queue out of arrival order", md.id)
			}
			last = q.seq
			if q.kind != tkRequest {
				continue
			}
			for b := md.busy; b != 0; b &= b - 1 {
				if r := &m.ts.t[md.slotT[trailing(b)]]; r.seq > q.seq {
					return fmt.Errorf("%s: request #%d admitted before earlier #%d", md.id, r.seq, q.seq)
				}
			}
		}
	}
	return nil
}

// NoPartialPool: a pool serves only when complete, a ready model has one,
// and only a ready or probing (reconfiguring) model keeps one; running requests run on a published pool.
func checkNoPartialPool(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		// The old pool stays published while a reconfigure probes its replacement.
		if (md.state == Ready && !md.published) || (md.published && md.state != Ready && md.state != Reconfiguring) {
			return fmt.Errorf("%s: published=%v in state %s", md.id, md.published, md.state)
		}
		if md.published && (md.sessions != md.cfg.Slots || md.built != md.sessions) {
			return fmt.Errorf("%s: published %d of %d sessions", md.id, md.sessions, md.cfg.Slots)
		}
		if !md.published && md.sessions != 0 {
			return fmt.Errorf("%s: %d sessions without a published pool", md.id, md.sessions)
		}
		if md.built > md.cfg.Slots {
			return fmt.Errorf("%s: built %d sessions for %d slots", md.id, md.built, md.cfg.Slots)
		}
		if md.active-md.waitInit > 0 && !md.published {
			return fmt.Errorf("%s: %d running requests without a pool", md.id, md.active-md.waitInit)
		}
	}
	return nil
}

// MetadataConsistent: the published pool was built from the committed
// config, and every running request is bound to that version: metadata is
// never a partial mix.
func checkMetadataConsistent(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		if md.published && md.poolVersion != md.version {
			return fmt.Errorf("%s: pool v%d serves committed v%d", md.id, md.poolVersion, md.version)
		}
		for b := md.busy; b != 0; b &= b - 1 {
			t := &m.ts.t[md.slotT[trailing(b)]]
			if t.phase == phRunning && t.version != md.version {
				return fmt.Errorf("%s: request bound to v%d, committed v%d", md.id, t.version, md.version)
			}
		}
	}
	return nil
}

// ResidencyLimit: the ledger is the sum of what resident models hold; a
// model is resident exactly while it has sessions (building, serving or
// tearing down); the limits hold.
func checkResidencyLimit(m *Machine) error {
	count, used := 0, int64(0)
	for h := range m.models {
		md := &m.models[h]
		hasPool := md.published || md.jkind == jobLoad || md.jkind == jobClone || md.jkind == jobTeardown
		if md.resident != hasPool {
			return fmt.Errorf("%s: resident=%v with published=%v job=%s", md.id, md.resident, md.published, jobNames[md.jkind])
		}
		if md.resident {
			count++
			used += md.resMB
		}
	}
	if count != m.resCount || used != m.resMB {
		return fmt.Errorf("ledger %d models/%dMB, models hold %d/%dMB", m.resCount, m.resMB, count, used)
	}
	if n := m.opts.MaxLoadedModels; n > 0 && count > n {
		return fmt.Errorf("%d resident models, limit %d", count, n)
	}
	if b := m.opts.MemoryBudgetMB; b > 0 && used > b {
		return fmt.Errorf("%dMB resident, budget %dMB", used, b)
	}
	return nil
}

// LedgerBounds: the residency ledger is in range with arithmetic that
// cannot wrap: every resident pool charges 0..MaxMemoryMB and a model that
// is not resident charges nothing; the ledger's total is the checked sum of
// the resident pools' charges, 0 <= total and total <= the budget when one
// is set; the resident count is 0..registered models and within the limit.
// ResidencyLimit's sum wraps with an overflowed ledger and still agrees;
// this check does not (CONTRACT.md res.ledger-bounds).
func checkLedgerBounds(m *Machine) error {
	count, used := 0, int64(0)
	for h := range m.models {
		md := &m.models[h]
		if !md.resident {
			if md.resMB != 0 {
				return fmt.Errorf("%s: not resident but charges %dMB", md.id, md.resMB)
			}
			continue
		}
		if md.resMB < 0 || md.resMB > MaxMemoryMB {
			return fmt.Errorf("%s: charges %dMB, outside 0..%d", md.id, md.resMB, MaxMemoryMB)
		}
		if md.resMB > math.MaxInt64-used {
			return fmt.Errorf("%s: the ledger's sum overflows", md.id)
		}
		count++
		used += md.resMB
	}
	if m.resMB < 0 || m.resMB != used {
		return fmt.Errorf("ledger %dMB, resident pools charge %dMB", m.resMB, used)
	}
	if b := m.opts.MemoryBudgetMB; b > 0 && m.resMB > b {
		return fmt.Errorf("ledger %dMB, budget %dMB", m.resMB, b)
	}
	if m.resCount < 0 || m.resCount > len(m.models) || m.resCount != count {
		return fmt.Errorf("ledger counts %d models, %d of %d registered are resident", m.resCount, count, len(m.models))
	}
	if n := m.opts.MaxLoadedModels; n > 0 && m.resCount > n {
		return fmt.Errorf("ledger counts %d models, limit %d", m.resCount, n)
	}
	return nil
}

// EvictOnlyIdle: eviction and idle retirement took only ready models with no
// lease, no queue and no manager.
func checkEvictOnlyIdle(m *Machine) error {
	for _, r := range m.evicted {
		if r.active != 0 || r.queued != 0 || r.mgr || !r.published {
			return fmt.Errorf("%s retired with active=%d queued=%d manager=%v published=%v",
				m.models[r.model].id, r.active, r.queued, r.mgr, r.published)
		}
	}
	return nil
}

// LeaseConservation: every live ticket is in exactly one place (a queue, a
// slot, a manager grant or a bulk parent), counters agree, and the machine
// waits only for jobs it started. At quiescence nothing is held.
func checkLeaseConservation(m *Machine) error {
	places, jobs := 0, 0
	for h := range m.models {
		md := &m.models[h]
		nReq, nMgr := 0, 0
		for i := md.head; i >= 0; i = m.ts.t[i].next {
			t := &m.ts.t[i]
			if t.model != Handle(h) || t.phase != phQueued {
				return fmt.Errorf("%s: queued ticket of model %d in phase %s", md.id, t.model, phaseNames[t.phase])
			}
			if t.kind == tkRequest {
				nReq++
			} else {
				nMgr++
			}
		}
		if nReq != md.nReq || nMgr != md.nMgr {
			return fmt.Errorf("%s: queue holds %d/%d, counters say %d/%d", md.id, nReq, nMgr, md.nReq, md.nMgr)
		}
		places += nReq + nMgr + md.active
		if md.mgr >= 0 {
			places++
		}
		if md.jkind != jobNone {
			jobs++
		}
		if md.waitInit > 0 && md.jkind != jobLoad && md.jkind != jobClone && !md.inLoaders {
			return fmt.Errorf("%s: %d requests wait for a pool nobody builds", md.id, md.waitInit)
		}
	}
	// A bulk's barriers are all published in its submitting step: each
	// member it still waits for is a live barrier. One pass over the table,
	// counting into a reused scratch slice (this check runs after every
	// simulated event).
	if cap(m.scratch) < len(m.ts.t) {
		m.scratch = make([]int32, len(m.ts.t))
	}
	members := m.scratch[:len(m.ts.t)]
	clear(members)
	bulks := 0
	for i := range m.ts.t {
		t := &m.ts.t[i]
		switch {
		case t.kind == tkBulk:
			bulks++
		case t.kind == tkManager && t.parent >= 0:
			members[t.parent]++
		}
	}
	places += bulks
	for i := 0; bulks > 0 && i < len(m.ts.t); i++ {
		if t := &m.ts.t[i]; t.kind == tkBulk {
			bulks--
			if t.pending != members[i] {
				return fmt.Errorf("bulk waits for %d members, %d barriers published", t.pending, members[i])
			}
		}
	}
	if places != m.ts.live {
		return fmt.Errorf("%d live tickets, %d accounted for", m.ts.live, places)
	}
	if jobs != m.jobs {
		return fmt.Errorf("%d jobs in flight, models wait for %d", m.jobs, jobs)
	}
	return nil
}

// QueueProgress: the machine is work-conserving: no queue head that the
// contract would admit or grant is left waiting, and the loader queue's head
// does not fit the ledger while nothing else holds it back.
func checkQueueProgress(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		if md.head < 0 {
			continue
		}
		t := &m.ts.t[md.head]
		if t.kind == tkRequest && md.mgr < 0 && admittable(md) && md.active < md.cfg.Slots {
			return fmt.Errorf("%s: request at the head could take a slot", md.id)
		}
		if t.kind == tkManager && md.settled() {
			return fmt.Errorf("%s: manager at the head of a settled model waits", md.id)
		}
	}
	if len(m.loaders) > 0 && !(m.opts.SerializeColdLoads && m.loads > 0) {
		h := m.loaders[0]
		md := &m.models[h]
		if m.fits(md.cfg.MemoryMB, false) {
			return fmt.Errorf("%s: waits for residency that is free", md.id)
		}
	}
	return nil
}

// TombstoneEmpty: an unregistered entry holds nothing: no queued or
// admitted ticket, no manager, job, pool, loader place or ledger charge, so
// no lease or worker can hold a pointer into it (CONTRACT.md
// unreg.tombstone).
func checkTombstoneEmpty(m *Machine) error {
	for h := range m.models {
		md := &m.models[h]
		if !md.gone {
			continue
		}
		if md.state != Unloaded || md.published || md.active != 0 || md.busy != 0 || md.head >= 0 || md.tail >= 0 ||
			md.nReq != 0 || md.nMgr != 0 || md.mgr >= 0 || md.step != msNone || md.jkind != jobNone || md.inLoaders ||
			md.resident || md.resMB != 0 || md.sessions != 0 || md.built != 0 {
			return fmt.Errorf("%s: tombstone holds state=%s published=%v active=%d queued=%d+%d manager=%v job=%s resident=%v",
				md.id, md.state, md.published, md.active, md.nReq, md.nMgr, md.mgr >= 0, jobNames[md.jkind], md.resident)
		}
	}
	return nil
}
