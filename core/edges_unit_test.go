package core

import (
	"slices"
	"testing"
)

// Edges the 3341c77 mutation run's unit check left unpinned: each test
// pins one decision a mutant changed without any unit test noticing.

// TestTouchedNamesEachChangedModelOnce: Touched lists the models the events
// since the last Advance changed, each once, and forgets them at Advance,
// from the very first Advance on (the epoch that marks membership must
// never make an untouched model look touched).
func TestTouchedNamesEachChangedModelOnce(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Touched(); len(got) != 0 {
		t.Fatalf("fresh machine touched %v", got)
	}
	m.Advance()
	m.SubmitManager(1, "a", OpApply, cfg(2), NoTimeout)
	m.SubmitManager(2, "b", OpApply, cfg(1), NoTimeout)
	a, _ := m.Lookup("a")
	b, _ := m.Lookup("b")
	if got := m.Touched(); !slices.Equal(got, []Handle{a, b}) {
		t.Fatalf("after two registers: touched %v, want [%d %d]", got, a, b)
	}
	// Asking again adds nothing.
	if got := m.Touched(); !slices.Equal(got, []Handle{a, b}) {
		t.Fatalf("second call: touched %v", got)
	}
	var loads []Effect
	for _, e := range m.Effects() {
		if e.Kind == EfStartLoad {
			loads = append(loads, e)
		}
	}
	m.Advance()
	if got := m.Touched(); len(got) != 0 {
		t.Fatalf("after Advance: touched %v", got)
	}
	if len(loads) != 2 {
		t.Fatalf("loads %v", loads)
	}
	if err := m.LoadDone(3, loads[1].Job, 1, false); err != nil { // b's
		t.Fatal(err)
	}
	if got := m.Touched(); !slices.Equal(got, []Handle{b}) {
		t.Fatalf("after b's load: touched %v, want [%d]", got, b)
	}
	for range 3 {
		m.Advance()
		if got := m.Touched(); len(got) != 0 {
			t.Fatalf("after Advance: touched %v", got)
		}
	}
	if err := m.LoadDone(4, loads[0].Job, 2, false); err != nil { // a's
		t.Fatal(err)
	}
	if got := m.Touched(); !slices.Equal(got, []Handle{a}) {
		t.Fatalf("after a's load: touched %v, want [%d]", got, a)
	}
}

// TestIdleTimeoutZeroNeverRetires: IdleTimeout 0 is off: an idle ready
// model survives any Tick, and NextDeadline has nothing to wake for
// (CONTRACT.md res.idle-retirement).
func TestIdleTimeoutZeroNeverRetires(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), 1)
	r := h.request("a")
	h.release(r)
	if nd := h.m.NextDeadline(); nd != 0 {
		t.Fatalf("NextDeadline %d, want 0", nd)
	}
	h.now += 1 << 40
	h.m.Tick(h.now)
	h.collect()
	if st := h.state("a"); st.State != Ready || !st.Loaded {
		t.Fatalf("after a Tick with IdleTimeout 0: %+v", st)
	}
}

// TestNextDeadlineIsTheEarliest: with several deadlines pending,
// NextDeadline is the earliest of them, whichever order they arrived in
// (CONTRACT.md time.admission-timeout).
func TestNextDeadlineIsTheEarliest(t *testing.T) {
	for _, order := range [][2]int64{{8000, 3000}, {3000, 8000}} {
		h := newHarness(t, Options{})
		h.register("a", cfg(1), 1)
		h.request("a") // takes the slot
		t1 := h.requestT("a", order[0])
		at1 := h.now
		t2 := h.requestT("a", order[1])
		at2 := h.now
		want := min(at1+order[0], at2+order[1])
		if nd := h.m.NextDeadline(); nd != want {
			t.Fatalf("timeouts %v: NextDeadline %d, want %d", order, nd, want)
		}
		if d := h.m.Deadline(t1); d != at1+order[0] {
			t.Fatalf("Deadline of the first %d, want %d", d, at1+order[0])
		}
		if d := h.m.Deadline(t2); d != at2+order[1] {
			t.Fatalf("Deadline of the second %d, want %d", d, at2+order[1])
		}
	}
}

// TestZeroMemoryFits: a model that declares 0 MB is resident like any
// other, with a memory budget and without (CONTRACT.md res.limits).
func TestZeroMemoryFits(t *testing.T) {
	for _, opts := range []Options{{}, {MemoryBudgetMB: 100}, {MaxLoadedModels: 2}} {
		h := newHarness(t, opts)
		c := cfg(1)
		c.MemoryMB = 0
		h.register("a", c, 1)
		if st := h.state("a"); st.State != Ready || st.ResidentMB != 0 {
			t.Fatalf("%+v: %+v", opts, st)
		}
		h.expect(h.request("a"), "granted")
	}
}

// TestRegistrationKeepsNoRegisterOnlyFields: a registration's BaseVersion
// and RegisterOnly shape the first version and whether it loads; the
// config the model keeps has neither (a later apply of the same config is
// the same config).
func TestRegistrationKeepsNoRegisterOnlyFields(t *testing.T) {
	h := newHarness(t, Options{})
	c := cfg(1)
	c.BaseVersion = 7
	h.register("a", c, 1)
	v := h.m.Inspect(h.handle("a"))
	if v.Version != 7 || v.Config.BaseVersion != 0 || v.Config.RegisterOnly {
		t.Fatalf("version %d, kept config %+v", v.Version, *v.Config)
	}
	if c.BaseVersion != 7 {
		t.Fatal("the caller's config was changed")
	}
	plain := cfg(1)
	h.register("b", plain, 1)
	if got := h.m.Inspect(h.handle("b")).Config; got != plain {
		t.Fatalf("a config without registration-only fields was copied: %p, want %p", got, plain)
	}
}

// TestQueueLimitRejectKeepsArrivalOrder: a request refused at the queue
// limit still takes a place in the arrival order, so whatever is queued
// next is later than everything queued before it (CONTRACT.md
// time.queue-limit, order.request-then-request).
func TestQueueLimitRejectKeepsArrivalOrder(t *testing.T) {
	h := newHarness(t, Options{})
	c := cfg(1)
	c.MaxQueue = 2
	h.register("a", c, 1)
	r1 := h.request("a")
	h.request("a")
	second := h.request("a")
	h.expect(h.request("a"), "reject server_busy")
	h.release(r1)          // the first queued request runs; second stays queued
	last := h.request("a") // the harness checks FIFOAdmission here
	v := h.m.Inspect(h.handle("a"))
	if len(v.Queue) != 2 || v.Queue[0].Ticket != second || v.Queue[1].Ticket != last || v.Queue[1].Seq <= v.Queue[0].Seq {
		t.Fatalf("queue %+v", v.Queue)
	}
}

// TestShutdownEndsAQueuedBulkShuttingDown: shutdown rejects a bulk's
// queued member barrier, and the bulk ends shutting_down when its last
// member does, not Done (CONTRACT.md time.shutdown-queued).
func TestShutdownEndsAQueuedBulkShuttingDown(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), 1)
	r := h.request("a")
	bulk := h.bulkUnload("a") // a's member waits behind the running request
	h.expect(bulk, "pending")
	h.shutdown()
	h.expect(bulk, "reject shutting_down")
	h.release(r)
}

// TestCloneGrowsItsEffectBuffer: a clone starts with a small effect
// buffer; a step that fills it exactly and then grants still grants
// (Machine.next appends at capacity).
func TestCloneGrowsItsEffectBuffer(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	c.SubmitManager(1, "a", OpApply, cfg(MaxSlots), NoTimeout)
	a, _ := c.Lookup("a")
	for range MaxSlots {
		c.SubmitRequest(2, a, NoTimeout)
	}
	var load Effect
	for _, e := range c.Effects() {
		if e.Kind == EfStartLoad {
			load = e
		}
	}
	c.Advance()
	if err := c.LoadDone(3, load.Job, MaxSlots, false); err != nil {
		t.Fatal(err)
	}
	// The pool's sessions are cloned one at a time; the last CloneDone
	// publishes it, ends the manager and grants all 16 waiting requests in
	// one step: 18 effects against the clone's buffer of 8.
	granted := 0
	for step := 0; step < 2*MaxSlots; step++ {
		var clone Effect
		for _, e := range c.Effects() {
			switch e.Kind {
			case EfStartClone:
				clone = e
			case EfGrant:
				granted++
			}
		}
		c.Advance()
		if clone.Kind != EfStartClone {
			break
		}
		if err := c.CloneDone(4, clone.Job, false); err != nil {
			t.Fatal(err)
		}
	}
	if granted != MaxSlots {
		t.Fatalf("%d of %d requests granted", granted, MaxSlots)
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestTicketZeroInEveryRole: ticket index 0 is a ticket like any other, in
// every place a loop or a test reads a ticket index (a `>= 0` that became
// `> 0` skips exactly that ticket): a queued request with a deadline, a
// bulk parent, and a granted manager waiting for residency.
func TestTicketZeroInEveryRole(t *testing.T) {
	// a: 1 slot; index 1 runs, index 0 is a queued request with a 2000 ns
	// admission timeout.
	queuedZero := func(t *testing.T) (*harness, Ticket) {
		h := newHarness(t, Options{})
		h.register("a", cfg(1), 1) // frees index 0
		r1 := h.request("a")       // index 0
		h.request("a")             // index 1, queued
		h.release(r1)              // index 1 runs
		q := h.requestT("a", 2000) // index 0, queued
		if h.m.ts.lookup(q) != 0 {
			t.Fatalf("setup: the queued request is at index %d", h.m.ts.lookup(q))
		}
		return h, q
	}
	t.Run("queued request: inspected, its deadline, its timeout", func(t *testing.T) {
		h, q := queuedZero(t)
		dead := h.now + 2000
		if v := h.m.Inspect(h.handle("a")); len(v.Queue) != 1 || v.Queue[0].Ticket != q {
			t.Fatalf("Inspect's queue %+v", v.Queue)
		}
		if d := h.m.Deadline(q); d != dead {
			t.Fatalf("Deadline %d, want %d", d, dead)
		}
		if nd := h.m.NextDeadline(); nd != dead {
			t.Fatalf("NextDeadline %d, want %d", nd, dead)
		}
		h.now = dead
		h.m.Tick(h.now)
		h.collect()
		h.expect(q, "reject server_busy")
	})
	t.Run("queued request: shutdown rejects it", func(t *testing.T) {
		h, q := queuedZero(t)
		h.shutdown()
		h.expect(q, "reject shutting_down")
	})

	// a: 1 slot; index 1 runs; a bulk unload of a is index 0 and its
	// member barrier waits behind the running request.
	bulkZero := func(t *testing.T) (*harness, Ticket, Ticket) {
		h := newHarness(t, Options{})
		h.register("a", cfg(1), 1)
		r1 := h.request("a")
		r2 := h.request("a")
		h.release(r1)
		bulk := h.bulkUnload("a")
		if h.m.ts.lookup(bulk) != 0 {
			t.Fatalf("setup: the bulk is at index %d", h.m.ts.lookup(bulk))
		}
		return h, bulk, r2
	}
	t.Run("bulk parent: its member is a member", func(t *testing.T) {
		h, bulk, r2 := bulkZero(t)
		v := h.m.Inspect(h.handle("a"))
		if len(v.Queue) != 1 || !v.Queue[0].Member || v.Queue[0].Kind != "manager" {
			t.Fatalf("Inspect's queue %+v", v.Queue)
		}
		h.release(r2)
		h.completeAll(1)
		h.expect(bulk, "done")
		if res := h.bulk[bulk]; res == nil || !slices.Equal(res.Unloaded, []string{"a"}) {
			t.Fatalf("bulk result %+v", res)
		}
	})
	t.Run("bulk parent: shutdown ends it shutting_down", func(t *testing.T) {
		h, bulk, r2 := bulkZero(t)
		h.shutdown() // its one member was queued: nothing left to wait for
		h.expect(bulk, "reject shutting_down")
		h.release(r2)
	})

	// One resident model at most: a holds it, idle; b's load manager is
	// index 0, granted, and waits in the loader queue for a's teardown; a
	// request for b waits behind the manager.
	t.Run("granted manager waiting for residency", func(t *testing.T) {
		h := newHarness(t, Options{MaxLoadedModels: 1})
		h.register("b", cfg(1), 1)
		h.register("a", cfg(1), 1) // evicts b
		mgr := h.manager("b", OpLoad)
		rb := h.request("b")
		md := &h.m.models[h.handle("b")]
		if h.m.ts.lookup(mgr) != 0 || md.mgr != 0 || !md.inLoaders {
			t.Fatalf("setup: manager at %d, granted %d, in loaders %v\n%s", h.m.ts.lookup(mgr), md.mgr, md.inLoaders, h.m.Describe())
		}
		h.expect(rb, "pending")
		h.step("a", EfStartTeardown, 0, false)
		h.expect(rb, "pending")
		h.completeAll(1)
		h.expect(mgr, "done")
		h.expect(rb, "granted")
	})
}

// TestCopyIntoFreshAndReused: CopyInto makes an exact, independent copy
// into a zero Machine (nothing to reuse) and again into the same one
// (everything reused), as the model checker does with its spare states.
func TestCopyIntoFreshAndReused(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 2})
	h.register("a", cfg(2), 2)
	h.register("b", cfg(1), 1)
	h.request("a")
	h.manager("b", OpUnload)
	var c Machine
	for round := range 2 {
		h.m.CopyInto(&c)
		if got, want := c.Describe(), h.m.Describe(); got != want || string(c.AppendKey(nil)) != string(h.m.AppendKey(nil)) {
			t.Fatalf("round %d: copy\n%s\nwant\n%s", round, got, want)
		}
		if x, ok := c.Lookup("b"); !ok || x != h.handle("b") {
			t.Fatalf("round %d: the copy's index has b at %d, %v", round, x, ok)
		}
		// The copy is independent: stepping it leaves the original as it was.
		before := h.m.Describe()
		c.SubmitRequest(h.now+1, h.handle("a"), NoTimeout)
		c.SubmitManager(h.now+1, "c", OpApply, cfg(1), NoTimeout)
		if h.m.Describe() != before {
			t.Fatalf("round %d: stepping the copy changed the original", round)
		}
		if _, ok := h.m.Lookup("c"); ok {
			t.Fatalf("round %d: a model registered on the copy is in the original's index", round)
		}
		h.request("a") // the original moves on; the next round copies it again
	}
}

// TestObservationKinds: exactly Publish and Retire only report a decision
// (the checks that compare effects with the spec leave them out).
func TestObservationKinds(t *testing.T) {
	for k := EfNone; k <= EfRetire; k++ {
		if got, want := k.Observation(), k == EfPublish || k == EfRetire; got != want {
			t.Errorf("%s.Observation() = %v, want %v", k, got, want)
		}
	}
}
