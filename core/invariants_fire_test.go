package core

import (
	"strings"
	"testing"
)

// Every clause of every invariant fires on a state that breaks it, and only
// there: each case starts from a reachable state that passes every
// invariant, breaks one field (a bug the clause exists to catch), and wants
// the clause's own message under its invariant's name. A correct core never
// trips an invariant, so without these cases a check that went silent
// would pass every other test (the mutation run's survivors in
// invariants.go). The holds cases are the clauses' edges that a correct
// core does reach: the invariant must stay quiet there.

// fireState is one machine with a model in each state the cases need:
//
//	run   2 slots, Ready, one running request, one spare slot
//	mgrq  1 slot, Ready, one running request, an unload manager queued behind it
//	cold  1 slot, Loading after an unload, one request waiting for the pool
//	rcf   1 slot, Reconfiguring: a granted apply probes the replacement
//	bulk  1 slot, Ready, one running request, a bulk unload waiting for it
//	idle  1 slot, Ready, nothing in flight
type fireState struct {
	h *harness
	m *Machine
}

func newFireState(t *testing.T) fireState {
	h := newHarness(t, Options{})
	h.register("run", cfg(2), 2)
	h.register("mgrq", cfg(1), 1)
	h.register("cold", cfg(1), 1)
	h.register("rcf", cfg(1), 1)
	h.register("bulk", cfg(1), 1)
	h.register("idle", cfg(1), 1)
	h.request("run")
	h.request("mgrq")
	h.manager("mgrq", OpUnload)
	h.manager("cold", OpUnload)
	h.completeAll(1)
	h.request("cold")
	c := cfg(1)
	c.Options = `{"v":2}`
	h.apply("rcf", c)
	h.request("bulk")
	h.bulkUnload("bulk")
	f := fireState{h, h.m}
	for id, want := range map[string]State{"run": Ready, "mgrq": Ready, "cold": Loading, "rcf": Reconfiguring, "bulk": Ready, "idle": Ready} {
		if st := f.md(id).state; st != want {
			t.Fatalf("setup: %s is %s, want %s\n%s", id, st, want, h.m.Describe())
		}
	}
	if f.md("cold").waitInit != 1 || f.md("rcf").mgr < 0 || f.md("mgrq").head < 0 || f.md("bulk").head < 0 {
		t.Fatalf("setup:\n%s", h.m.Describe())
	}
	if err := h.m.CheckInvariants(); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return f
}

func (f fireState) md(id string) *model { return &f.m.models[f.h.handle(id)] }

// running is the ticket of the request in the lowest busy slot of id.
func (f fireState) running(id string) *ticket {
	md := f.md(id)
	return &f.m.ts.t[md.slotT[trailing(md.busy)]]
}

// head is the ticket at the head of id's FIFO.
func (f fireState) head(id string) *ticket { return &f.m.ts.t[f.md(id).head] }

// bulkParent is the live bulk parent ticket.
func (f fireState) bulkParent(t *testing.T) *ticket {
	for i := range f.m.ts.t {
		if f.m.ts.t[i].kind == tkBulk {
			return &f.m.ts.t[i]
		}
	}
	t.Fatal("no bulk parent")
	return nil
}

// wantFire: err is a check's answer; want is the message it must contain,
// or "" when the check must hold.
func wantFire(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("fired on a state it allows: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("got %v, want %q", err, want)
	}
}

func withSlots(md *model, n int) {
	c := *md.cfg
	c.Slots = n
	md.cfg = &c
}

func TestEveryInvariantClauseFires(t *testing.T) {
	for _, c := range []struct {
		inv, name string
		corrupt   func(t *testing.T, f fireState)
		want      string // "" : the invariant holds
	}{
		// CapacityBounds
		{"CapacityBounds", "no slots", func(_ *testing.T, f fireState) { withSlots(f.md("idle"), 0) }, "idle: slots=0"},
		{"CapacityBounds", "more slots than MaxSlots", func(_ *testing.T, f fireState) { withSlots(f.md("idle"), MaxSlots+1) }, "idle: slots=17"},
		{"CapacityBounds", "MaxSlots holds", func(_ *testing.T, f fireState) { withSlots(f.md("run"), MaxSlots) }, ""},
		{"CapacityBounds", "negative active", func(_ *testing.T, f fireState) { f.md("idle").active = -1 }, "idle: active=-1 slots=1"},
		{"CapacityBounds", "active above slots", func(_ *testing.T, f fireState) { f.md("run").active = 3 }, "run: active=3 slots=2"},
		{"CapacityBounds", "busy bits disagree", func(_ *testing.T, f fireState) { f.md("run").busy |= 1 << 1 }, "run: 2 slots marked busy, active=1"},
		{"CapacityBounds", "negative wait_init", func(_ *testing.T, f fireState) { f.md("idle").waitInit = -1 }, "idle: wait_init=-1 active=0"},
		{"CapacityBounds", "wait_init above active", func(_ *testing.T, f fireState) { f.md("run").waitInit = 2 }, "run: wait_init=2 active=1"},
		{"CapacityBounds", "sessions above capacity", func(_ *testing.T, f fireState) { f.md("run").capacity = 1 }, "run: 2 sessions on capacity 1"},
		{"CapacityBounds", "capacity at sessions holds", func(_ *testing.T, f fireState) { f.md("run").capacity = 2 }, ""},

		// ManagerExclusivity
		{"ManagerExclusivity", "manager beside a request", func(_ *testing.T, f fireState) { f.md("rcf").active = 1 }, "rcf: manager apply granted with 1 active requests"},
		{"ManagerExclusivity", "granted manager not managing", func(_ *testing.T, f fireState) {
			f.m.ts.t[f.md("rcf").mgr].phase = phQueued
		}, "rcf: manager ticket in phase queued"},
		{"ManagerExclusivity", "granted manager of another model", func(_ *testing.T, f fireState) {
			f.m.ts.t[f.md("rcf").mgr].model = f.h.handle("idle")
		}, "rcf: manager ticket in phase managing"},
		{"ManagerExclusivity", "requests on an unloaded model", func(_ *testing.T, f fireState) { f.md("run").state = Unloaded }, "run: 1 active requests in state unloaded"},
		{"ManagerExclusivity", "requests on a loading model hold", func(_ *testing.T, f fireState) { f.md("run").state = Loading }, ""},

		// NoPartialPool
		{"NoPartialPool", "ready without a pool", func(_ *testing.T, f fireState) {
			md := f.md("idle")
			md.published, md.sessions = false, 0
		}, "idle: published=false in state ready"},
		{"NoPartialPool", "a pool on an unloading model", func(_ *testing.T, f fireState) { f.md("idle").state = Unloading }, "idle: published=true in state unloading"},
		{"NoPartialPool", "published short of its slots", func(_ *testing.T, f fireState) { f.md("run").sessions = 1 }, "run: published 1 of 2 sessions"},
		{"NoPartialPool", "published with fewer built", func(_ *testing.T, f fireState) { f.md("run").built = 1 }, "run: published 2 of 2 sessions"},
		{"NoPartialPool", "sessions without a pool", func(_ *testing.T, f fireState) { f.md("cold").sessions = 1 }, "cold: 1 sessions without a published pool"},
		{"NoPartialPool", "built beyond the slots", func(_ *testing.T, f fireState) { f.md("cold").built = 2 }, "cold: built 2 sessions for 1 slots"},
		{"NoPartialPool", "built up to the slots holds", func(_ *testing.T, f fireState) { f.md("cold").built = 1 }, ""},
		{"NoPartialPool", "running without a pool", func(_ *testing.T, f fireState) { f.md("cold").waitInit = 0 }, "cold: 1 running requests without a pool"},

		// MetadataConsistent
		{"MetadataConsistent", "pool of another version", func(_ *testing.T, f fireState) { f.md("idle").poolVersion++ }, "idle: pool v2 serves committed v1"},
		{"MetadataConsistent", "request bound to another version", func(_ *testing.T, f fireState) { f.running("run").version++ }, "run: request bound to v2, committed v1"},
		{"MetadataConsistent", "a waiting request's version is not checked", func(_ *testing.T, f fireState) { f.running("cold").version += 5 }, ""},

		// ResidencyLimit
		{"ResidencyLimit", "resident without a pool", func(_ *testing.T, f fireState) {
			md := f.md("mgrq")
			md.state, md.published, md.sessions, md.built = Unloaded, false, 0, 0
			md.active, md.busy = 0, 0
		}, "mgrq: resident=true with published=false job=none"},
		{"ResidencyLimit", "a pool not charged", func(_ *testing.T, f fireState) { f.md("idle").resident = false }, "idle: resident=false with published=true job=none"},
		{"ResidencyLimit", "ledger counts one more", func(_ *testing.T, f fireState) { f.m.resCount++ }, "ledger 7 models/600MB, models hold 6/600MB"},
		{"ResidencyLimit", "ledger charges one more MB", func(_ *testing.T, f fireState) { f.m.resMB++ }, "ledger 6 models/601MB, models hold 6/600MB"},
		{"ResidencyLimit", "over the model limit", func(_ *testing.T, f fireState) { f.m.opts.MaxLoadedModels = 5 }, "6 resident models, limit 5"},
		{"ResidencyLimit", "at the model limit holds", func(_ *testing.T, f fireState) { f.m.opts.MaxLoadedModels = 6 }, ""},
		{"ResidencyLimit", "over the memory budget", func(_ *testing.T, f fireState) { f.m.opts.MemoryBudgetMB = 599 }, "600MB resident, budget 599MB"},
		{"ResidencyLimit", "at the memory budget holds", func(_ *testing.T, f fireState) { f.m.opts.MemoryBudgetMB = 600 }, ""},

		// LedgerBounds (the cap and the wrap are core/ledger_test.go's)
		{"LedgerBounds", "charges while not resident", func(_ *testing.T, f fireState) {
			md := f.md("mgrq")
			md.resident, md.resMB = false, 100
		}, "mgrq: not resident but charges 100MB"},
		{"LedgerBounds", "negative charge", func(_ *testing.T, f fireState) { f.md("idle").resMB = -1 }, "idle: charges -1MB, outside 0..1099511627776"},
		{"LedgerBounds", "ledger total disagrees", func(_ *testing.T, f fireState) { f.m.resMB-- }, "ledger 599MB, resident pools charge 600MB"},
		{"LedgerBounds", "ledger count disagrees", func(_ *testing.T, f fireState) { f.m.resCount-- }, "ledger counts 5 models, 6 of 6 registered are resident"},
		{"LedgerBounds", "ledger counts more than registered", func(_ *testing.T, f fireState) { f.m.resCount = 7 }, "ledger counts 7 models, 6 of 6 registered are resident"},
		{"LedgerBounds", "over the model limit", func(_ *testing.T, f fireState) { f.m.opts.MaxLoadedModels = 5 }, "ledger counts 6 models, limit 5"},
		{"LedgerBounds", "at the model limit holds", func(_ *testing.T, f fireState) { f.m.opts.MaxLoadedModels = 6 }, ""},

		// LeaseConservation
		{"LeaseConservation", "queued ticket of another model", func(_ *testing.T, f fireState) {
			f.head("mgrq").model = f.h.handle("idle")
		}, "mgrq: queued ticket of model 5 in phase queued"},
		{"LeaseConservation", "queued ticket in another phase", func(_ *testing.T, f fireState) {
			f.head("mgrq").phase = phManaging
		}, "mgrq: queued ticket of model 1 in phase managing"},
		{"LeaseConservation", "request counter disagrees", func(_ *testing.T, f fireState) { f.md("mgrq").nReq++ }, "mgrq: queue holds 0/1, counters say 1/1"},
		{"LeaseConservation", "manager counter disagrees", func(_ *testing.T, f fireState) { f.md("mgrq").nMgr-- }, "mgrq: queue holds 0/1, counters say 0/0"},
		{"LeaseConservation", "a waiting request nobody builds for", func(_ *testing.T, f fireState) {
			f.md("cold").jkind = jobProbe
		}, "cold: 1 requests wait for a pool nobody builds"},
		{"LeaseConservation", "a waiting request on a clone holds", func(_ *testing.T, f fireState) { f.md("cold").jkind = jobClone }, ""},
		{"LeaseConservation", "a waiting request on the loader queue holds", func(_ *testing.T, f fireState) {
			md := f.md("cold")
			md.jkind, md.inLoaders = jobNone, true
			f.m.jobs--
		}, ""},
		{"LeaseConservation", "bulk waits for one more member", func(t *testing.T, f fireState) { f.bulkParent(t).pending++ }, "bulk waits for 2 members, 1 barriers published"},
		{"LeaseConservation", "bulk waits for one fewer member", func(t *testing.T, f fireState) { f.bulkParent(t).pending-- }, "bulk waits for 0 members, 1 barriers published"},
		{"LeaseConservation", "a live ticket nowhere", func(_ *testing.T, f fireState) { f.m.ts.live++ }, "live tickets"},
		{"LeaseConservation", "a job nobody waits for", func(_ *testing.T, f fireState) { f.m.jobs++ }, "3 jobs in flight, models wait for 2"},

		// QueueProgress (a stalled request head is TestQueueProgressCatchesAStalledHead)
		{"QueueProgress", "a manager waits at the head of a settled model", func(_ *testing.T, f fireState) {
			md := f.md("mgrq")
			f.running("mgrq").phase = phQueued // out of its slot, as if released without a step
			md.busy, md.active = 0, 0
		}, "mgrq: manager at the head of a settled model waits"},
		{"QueueProgress", "a manager waits at the head of a settled unloaded model", func(_ *testing.T, f fireState) {
			md := f.md("mgrq")
			f.running("mgrq").phase = phQueued
			md.busy, md.active = 0, 0
			md.state, md.published, md.sessions, md.built = Unloaded, false, 0, 0
		}, "mgrq: manager at the head of a settled model waits"},
		{"QueueProgress", "a manager behind a running request holds", func(_ *testing.T, f fireState) {}, ""},
	} {
		t.Run(c.inv+"/"+c.name, func(t *testing.T) {
			f := newFireState(t)
			c.corrupt(t, f)
			var check func(*Machine) error
			for _, inv := range Invariants() {
				if inv.Name == c.inv {
					check = inv.Check
				}
			}
			if check == nil {
				t.Fatalf("no invariant %s", c.inv)
			}
			wantFire(t, check(f.m), c.want)
			if c.want != "" && !strings.Contains(f.m.CheckInvariants().Error(), c.inv+": ") {
				t.Fatalf("CheckInvariants does not name %s: %v", c.inv, f.m.CheckInvariants())
			}
		})
	}
}

// TestEvictOnlyIdleFires: the victims an eviction recorded in the current
// step are checked; a victim that was busy in any way fires, an idle one
// holds.
func TestEvictOnlyIdleFires(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(r *evictRecord)
		want    string
	}{
		{"idle victim holds", func(*evictRecord) {}, ""},
		{"victim with a lease", func(r *evictRecord) { r.active = 1 }, "a retired with active=1 queued=0 manager=false published=true"},
		{"victim with a queue", func(r *evictRecord) { r.queued = 1 }, "a retired with active=0 queued=1 manager=false published=true"},
		{"victim with a manager", func(r *evictRecord) { r.mgr = true }, "a retired with active=0 queued=0 manager=true published=true"},
		{"victim without a pool", func(r *evictRecord) { r.published = false }, "a retired with active=0 queued=0 manager=false published=false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{MaxLoadedModels: 1})
			h.register("a", cfg(1), 1)
			h.register("b", cfg(1), 1) // evicts a
			h.m.SubmitRequest(h.tick(), h.handle("a"), NoTimeout)
			// b is idle and evicted for a's cold load, in this step.
			if len(h.m.evicted) != 1 {
				t.Fatalf("setup: evicted %v\n%s", h.m.evicted, h.m.Describe())
			}
			r := &h.m.evicted[0]
			r.model = h.handle("a") // name the record after a for the message
			c.corrupt(r)
			wantFire(t, checkEvictOnlyIdle(h.m), c.want)
		})
	}
}

// TestQueueProgressLoaderHead: the loader queue's head waits while its
// victim's teardown runs; once the limit leaves room for it (the
// corruption), QueueProgress fires, unless the cold-load guard holds it
// (enabled and a load running).
func TestQueueProgressLoaderHead(t *testing.T) {
	for _, c := range []struct {
		name      string
		serialize bool
		loads     int
		want      string
	}{
		{"room for the head", false, 0, "b: waits for residency that is free"},
		{"the cold-load guard holds it", true, 1, ""},
		{"the cold-load guard with no load running", true, 0, "b: waits for residency that is free"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{MaxLoadedModels: 1})
			h.register("b", cfg(1), 1)
			h.register("a", cfg(1), 1) // evicts b
			h.request("b")             // evicts a; b waits for a's teardown
			if ls := h.m.Loaders(); len(ls) != 1 || ls[0] != h.handle("b") {
				t.Fatalf("setup: loaders %v\n%s", ls, h.m.Describe())
			}
			h.m.opts.MaxLoadedModels = 2
			h.m.opts.SerializeColdLoads = c.serialize
			h.m.loads = c.loads
			wantFire(t, checkQueueProgress(h.m), c.want)
		})
	}
}

// TestInvariantsSeeTicketZero: ticket index 0 is a ticket like any other;
// a clause that walks a queue or reads a granted manager must see it there
// (a `>= 0` that became `> 0` skips exactly that ticket).
func TestInvariantsSeeTicketZero(t *testing.T) {
	// a: 1 slot; index 0 is the granted manager of a's first load.
	granted := func(t *testing.T) (*harness, *model) {
		h := newHarness(t, Options{})
		h.apply("a", cfg(1))
		md := &h.m.models[h.handle("a")]
		if md.mgr != 0 {
			t.Fatalf("setup: manager at index %d\n%s", md.mgr, h.m.Describe())
		}
		return h, md
	}
	// a: 1 slot; a request runs (index 1), an unload manager waits at
	// the head (index 0), a request waits behind it (index 2).
	queued := func(t *testing.T) (*harness, *model) {
		h := newHarness(t, Options{})
		h.register("a", cfg(1), 1) // frees index 0
		r1 := h.request("a")       // index 0
		h.request("a")             // index 1, queued
		h.release(r1)              // index 1 runs, index 0 is free again
		h.manager("a", OpUnload)   // index 0, queued
		h.request("a")             // index 2, queued
		md := &h.m.models[h.handle("a")]
		if md.head != 0 || h.m.ts.t[0].kind != tkManager || md.slotT[0] != 1 {
			t.Fatalf("setup: head %d slot 0 holds %d\n%s", md.head, md.slotT[0], h.m.Describe())
		}
		return h, md
	}
	for _, c := range []struct {
		name    string
		setup   func(*testing.T) (*harness, *model)
		corrupt func(h *harness, md *model)
		check   func(*Machine) error
		want    string
	}{
		{"a granted manager at 0 beside a request", granted, func(_ *harness, md *model) { md.active = 1 },
			checkManagerExclusivity, "granted with 1 active requests"},
		{"a request admitted past the manager at 0", queued, func(h *harness, _ *model) { h.m.ts.t[1].seq = h.m.ts.t[0].seq + 1 },
			checkNoBarging, "admitted past waiting manager"},
		{"the queue from 0 out of order", queued, func(h *harness, _ *model) { h.m.ts.t[2].seq = h.m.ts.t[0].seq - 1 },
			checkFIFOAdmission, "out of arrival order"},
		{"the manager counter misses the manager at 0", queued, func(_ *harness, md *model) { md.nMgr = 0 },
			checkLeaseConservation, "queue holds 1/1, counters say 1/0"},
		{"the manager at 0 waits on a settled model", queued, func(h *harness, md *model) {
			h.m.ts.t[1].phase = phQueued
			md.busy, md.active = 0, 0
		}, checkQueueProgress, "manager at the head of a settled model waits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, md := c.setup(t)
			c.corrupt(h, md)
			if err := c.check(h.m); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestTombstoneEmptyFires: a tombstone that holds anything fires
// TombstoneEmpty (CONTRACT.md unreg.tombstone); a clean one, and a model
// registered again on it, hold.
func TestTombstoneEmptyFires(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(md *model)
		want    string
	}{
		{"clean", func(*model) {}, ""},
		{"resident", func(md *model) { md.resident, md.resMB = true, 100 }, "a: tombstone holds"},
		{"loading", func(md *model) { md.state = Loading }, "state=loading"},
		{"published", func(md *model) { md.published = true }, "published=true"},
		{"a lease", func(md *model) { md.active = 1 }, "active=1"},
		{"a slot", func(md *model) { md.busy = 1 }, "a: tombstone holds"},
		{"a queued ticket", func(md *model) { md.head, md.nReq = 0, 1 }, "queued=1+0"},
		{"a queue tail", func(md *model) { md.tail = 0 }, "a: tombstone holds"},
		{"a queued manager", func(md *model) { md.nMgr = 1 }, "queued=0+1"},
		{"a manager", func(md *model) { md.mgr = 0 }, "manager=true"},
		{"a manager step", func(md *model) { md.step = msUnload }, "a: tombstone holds"},
		{"a job", func(md *model) { md.jkind = jobTeardown }, "job=teardown"},
		{"a loader place", func(md *model) { md.inLoaders = true }, "a: tombstone holds"},
		{"a charge", func(md *model) { md.resMB = 1 }, "a: tombstone holds"},
		{"sessions", func(md *model) { md.sessions = 1 }, "a: tombstone holds"},
		{"a build", func(md *model) { md.built = 1 }, "a: tombstone holds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.register("a", cfg(1), 1)
			h.manager("a", OpUnregister)
			h.completeAll(1)
			hd, ok := h.m.Entry("a")
			if !ok || !h.m.Unregistered(hd) {
				t.Fatalf("setup:\n%s", h.m.Describe())
			}
			c.corrupt(&h.m.models[hd])
			wantFire(t, checkTombstoneEmpty(h.m), c.want)
		})
	}
	h := newHarness(t, Options{})
	h.register("a", cfg(1), 1)
	h.manager("a", OpUnregister)
	h.completeAll(1)
	h.register("a", cfg(1), 1)
	wantFire(t, checkTombstoneEmpty(h.m), "")
	if st := h.m.Status(h.handle("a")); st.ConfigVersion != 2 || st.Unregistered || !st.Loaded {
		t.Fatalf("re-registered: %+v", st)
	}
}
