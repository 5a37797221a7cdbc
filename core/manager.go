package core

// SubmitManager is the action SubmitManager: a targeted management operation
// enters model id's FIFO as an exclusive barrier. OpApply with cfg registers
// an unknown ID (publishing its entry at once, before the first load) or
// reconfigures a known one; OpLoad and OpUnload target a known ID. timeout is
// the admission override as for SubmitRequest. The ticket ends with Done or
// Reject.
//
// Decision tree (CONTRACT.md, "Operations crossed with model states";
// reg.new, reg.invalid, reg.same-id, fail.invalid-spec, unreg.re-register,
// time.shutdown-new-submission):
//
//	(1) invalid config: Reject invalid_request, nothing changes.
//	(2) shutting down: Reject shutting_down.
//	(3) unknown or unregistered ID: OpApply registers it (reusing a
//	    tombstone, past its last version); others Reject not_found.
//	(4) queue behind everything earlier; a settled model grants at once.
func (m *Machine) SubmitManager(now int64, id string, op Op, cfg *Config, timeout int64) Ticket {
	i := m.ts.alloc()
	t := &m.ts.t[i]
	t.kind, t.op, t.cfg, t.parent, t.since, t.prev, t.next, t.model = tkManager, op, cfg, -1, now, -1, -1, NoModel
	tid := m.ts.id(i)
	m.begin(RejectOther)
	m.submitted = tid
	m.seq++
	t.seq = m.seq
	if op == OpApply && cfg.Validate() != nil || op == OpNone || op == OpBulk || op > OpUnregister { // (1)
		m.finish(i, EfReject, CodeInvalid)
		return tid
	}
	if m.shutdown { // (2)
		m.finish(i, EfReject, CodeShuttingDown)
		return tid
	}
	h, ok := m.Lookup(id)
	if !ok { // (3)
		if op != OpApply {
			m.finish(i, EfReject, CodeNotFound)
			return tid
		}
		h = m.register(id, cfg.registration(), max(cfg.BaseVersion, 1))
		t.committed = true // the registration is its first committed version
		t.op = OpLoad      // the entry already carries cfg as its first version
		if cfg.RegisterOnly {
			t.op = OpUnload // a restored unloaded model: granted at once, nothing to tear down
		}
		timeout = 0
	} else if op == OpApply {
		t.cfg = cfg.registration() // a reconfigure ignores the registration fields
	}
	t.model = h
	if d := m.effectiveTimeout(&m.models[h], timeout); d > 0 {
		if m.allOverdue(now, &m.models[h], d) && ok { // every occupied slot is overdue: fail fast
			m.finish(i, EfReject, CodeServerBusy)
			return tid
		}
		t.dead = deadline(now, d)
	}
	m.enqueue(h, i) // (4)
	m.markDirty(h)
	m.settle(now)
	return tid
}

// SubmitBulkUnload is the action SubmitBulkUnload: a registry snapshot of
// ids, then barriers for every registered member published in this one step,
// so overlapping bulks order identically on every shared model and never
// wait on each other in a cycle. Ready-idle members are freed at once; busy
// ones after their earlier work. Unknown IDs go to NotFound. Bulk waits are
// unbounded. The ticket ends with Done carrying the BulkResult (CONTRACT.md
// order.bulk-then-bulk, order.bulk-and-single).
func (m *Machine) SubmitBulkUnload(now int64, ids []string) Ticket {
	p := m.ts.alloc()
	pt := &m.ts.t[p]
	pt.kind, pt.op, pt.parent, pt.since, pt.prev, pt.next, pt.phase, pt.model = tkBulk, OpBulk, -1, now, -1, -1, phBulk, NoModel
	pid := m.ts.id(p)
	m.begin(RejectOther)
	m.submitted = pid
	m.seq++
	pt.seq = m.seq
	res := &BulkResult{}
	pt.bulk = res
	if m.shutdown {
		m.finish(p, EfReject, CodeShuttingDown)
		return pid
	}
	seen := make(map[string]bool, len(ids))
	var members []Handle
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if h, ok := m.Lookup(id); ok {
			res.Unloaded = append(res.Unloaded, id)
			members = append(members, h)
		} else {
			res.NotFound = append(res.NotFound, id)
		}
	}
	pt.pending = int32(len(members))
	if len(members) == 0 {
		m.finish(p, EfDone, CodeOK)
		return pid
	}
	for k, h := range members {
		if m.mut(MutBulkOneByOne) && k > 0 {
			break
		}
		m.addMember(h, p, now)
	}
	if m.mut(MutBulkOneByOne) && len(members) > 1 {
		m.later = append(m.later, pendingMembers{parent: p, models: members[1:]})
	}
	m.settle(now)
	return pid
}

func (m *Machine) addMember(h Handle, p int32, now int64) {
	c := m.ts.alloc()
	ct := &m.ts.t[c]
	ct.kind, ct.op, ct.model, ct.parent, ct.since, ct.prev, ct.next = tkManager, OpUnload, h, p, now, -1, -1
	m.enqueue(h, c)
	m.markDirty(h)
}

// cancelBulk withdraws a bulk's queued members; members already running
// finish, and the parent ends when the last one does.
func (m *Machine) cancelBulk(p int32, r Reason) {
	pt := &m.ts.t[p]
	pt.reason = r
	for h := range m.models {
		md := &m.models[h]
		for i := md.head; i >= 0; {
			nx := m.ts.t[i].next
			if m.ts.t[i].parent == p {
				m.unlink(i)
				m.markDirty(Handle(h))
				m.ts.release(i)
				pt.pending--
			}
			i = nx
		}
	}
	m.dropLater(p)
	if pt.pending == 0 {
		pt.pending = 1
		m.memberDone(p)
	}
}

// grantManager makes ticket i the exclusive owner of a settled model and
// starts its operation (CONTRACT.md order.manager-then-manager,
// state.reconfiguring, state.unloading).
func (m *Machine) grantManager(now int64, h Handle, i int32) {
	md := &m.models[h]
	t := &m.ts.t[i]
	t.phase, t.since = phManaging, now
	md.mgr = i
	endBackoff(md) // a manager's load is never refused for earlier failures
	switch t.op {
	case OpLoad:
		m.managedLoad(h)
	case OpUnload:
		if md.state == Unloaded {
			m.managerDone(h, EfDone, CodeOK)
			return
		}
		md.step = msUnload
		m.retire(h, CauseUnload)
	case OpUnregister:
		if md.state == Unloaded {
			m.managerDone(h, EfDone, CodeOK)
			m.tombstone(h)
			return
		}
		md.step = msUnregister
		m.retire(h, CauseUnload)
	case OpApply:
		m.apply(now, h, t.cfg)
	}
}

// tombstone ends model h's registration (CONTRACT.md unreg.barrier,
// unreg.404-after, unreg.tombstone): its unregister was granted on a
// drained model and its pool is gone, so no lease, job or ledger charge
// points at it. The entry keeps its id, handle, last config and version;
// every ticket queued behind the barrier is answered not_found in arrival
// order, and a bulk's barrier on it ends as if unloaded.
func (m *Machine) tombstone(h Handle) {
	md := &m.models[h]
	for i := md.head; i >= 0; {
		t := &m.ts.t[i]
		nx := t.next
		m.unlink(i)
		if t.parent >= 0 {
			p := t.parent
			m.ts.release(i)
			m.memberDone(p)
		} else {
			m.finish(i, EfReject, CodeNotFound)
		}
		i = nx
	}
	*md = model{id: md.id, gone: true, state: Unloaded, cfg: md.cfg, version: md.version, head: -1, tail: -1, mgr: -1,
		dirty: md.dirty, touchedIn: md.touchedIn}
	m.touch(h)
}

// managedLoad loads for the granted manager, or finishes it when loaded.
func (m *Machine) managedLoad(h Handle) {
	md := &m.models[h]
	if md.state == Ready {
		m.managerDone(h, EfDone, CodeOK)
		return
	}
	md.step = msLoad
	m.startLoad(h)
}

// apply reconfigures a model for the granted manager (CONTRACT.md,
// "Failure boundaries"): validate before any teardown; an unchanged session
// set reuses the live capacity, a changed multi-slot one is probed; failure
// before commit keeps the old pool, count, metadata and residency
// (CONTRACT.md fail.capacity-probe, fail.unsupported-capacity,
// fail.after-commit).
func (m *Machine) apply(now int64, h Handle, cfg *Config) {
	md := &m.models[h]
	old := md.cfg
	if *cfg == *old {
		m.managedLoad(h)
		return
	}
	if cfg.sameSessions(old) && cfg.Slots == old.Slots && cfg.MemoryMB == old.MemoryMB {
		// Only admission metadata changed: the pool stays valid as built.
		m.commit(h, cfg)
		m.managedLoad(h)
		return
	}
	if cfg.Slots > 1 {
		if md.published && cfg.sameSessions(old) {
			if cfg.Slots > md.capacity {
				m.managerDone(h, EfReject, CodeInvalid)
				return
			}
		} else {
			md.pend = cfg
			md.step = msProbe
			md.state = Reconfiguring
			j := m.newJob(h, jobProbe)
			m.emit(Effect{Kind: EfStartProbe, Model: h, Job: j, Config: cfg, Version: md.version + 1})
			return
		}
	}
	m.replace(now, h, cfg)
}

// replace retires the old pool (if any), then commits cfg and loads it.
func (m *Machine) replace(now int64, h Handle, cfg *Config) {
	md := &m.models[h]
	if md.published {
		md.pend = cfg
		md.step = msTeardownOld
		m.retire(h, CauseReconfigure)
		md.state = Reconfiguring
		return
	}
	m.commit(h, cfg)
	md.pend = nil
	md.step = msLoad
	m.startLoad(h)
	md.state = Reconfiguring
}

// commit publishes a complete new config as the next version.
func (m *Machine) commit(h Handle, cfg *Config) {
	md := &m.models[h]
	md.cfg = cfg
	md.version++
	if md.mgr >= 0 {
		m.ts.t[md.mgr].committed = true
	}
	if md.published && !m.mut(MutStaleMetadata) {
		md.poolVersion = md.version
	}
}

// ProbeDone is the action ProbeDone: the private probe of a replacement
// config reports its capacity (or failed). Too small a capacity is
// invalid_request (for example slots=5 on capacity 4); either failure keeps
// the old state whole (CONTRACT.md fail.capacity-probe,
// fail.unsupported-capacity).
func (m *Machine) ProbeDone(now int64, j Job, capacity int, failed bool) error {
	md, h, err := m.jobModel(j, jobProbe)
	if err != nil {
		return err
	}
	m.begin(RejectOther)
	cfg := md.pend
	md.pend = nil
	md.state = Unloaded
	if md.published {
		md.state = Ready
	}
	switch {
	case failed:
		m.why = RejectLoadFailed
		m.managerDone(h, EfReject, CodeBackend)
	case capacity < cfg.Slots:
		m.why = RejectLoadFailed
		m.managerDone(h, EfReject, CodeInvalid)
	default:
		m.replace(now, h, cfg)
	}
	m.markDirty(h)
	m.settle(now)
	return nil
}

// managerDone ends the granted manager of h.
func (m *Machine) managerDone(h Handle, kind EffectKind, code Code) {
	md := &m.models[h]
	i := md.mgr
	md.mgr, md.step, md.pend = -1, msNone, nil
	if kind == EfDone {
		op := m.ts.t[i].op
		md.wantLoaded = op == OpApply || op == OpLoad // unloads and unregisters leave it unloaded
	}
	if m.ts.t[i].parent < 0 {
		st := m.Status(h)
		m.finishWith(i, kind, code, &st)
	} else {
		m.finish(i, kind, code)
	}
	m.markDirty(h)
}
