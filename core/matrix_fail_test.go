package core

import "testing"

// Matrix "Failure boundaries and recovery".

func TestFailInvalidSpecBeforeLiveChange(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	before := h.m.Describe()
	for _, bad := range []*Config{nil, cfg(0), cfg(17), {Slots: 1, AdmissionTimeout: -2}, {Slots: 1, MaxQueue: -1}, {Slots: 1, MemoryMB: -1}} {
		h.expect(h.apply("a", bad), "reject invalid_request")
		h.expect(h.apply("fresh", bad), "reject invalid_request")
	}
	none := h.m.SubmitManager(h.tick(), "a", OpNone, nil, NoTimeout)
	h.collect()
	h.expect(none, "reject invalid_request")
	if _, ok := h.m.Lookup("fresh"); ok || h.m.Describe() != before {
		t.Fatal("an invalid spec changed the registry")
	}
}

// slots=5 on capacity 4 against a live pool with the same session inputs:
// the live capacity decides, no probe, old pool kept, next request runs on it,
// a valid resize works afterwards.
func TestFailUnsupportedCapacityKeepsPool(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	five := cfg(5)
	h.expect(h.apply("a", five), "reject invalid_request")
	if _, ok := h.pending("a", EfStartProbe); ok {
		t.Fatal("probed although the live capacity answers")
	}
	st := h.state("a")
	if st.State != Ready || st.Slots != 2 || st.ConfigVersion != 1 || st.MaxParallelSlots != capacity {
		t.Fatalf("old state not kept: %+v", st)
	}
	r := h.request("a")
	h.expect(r, "granted v1")
	h.release(r)
	ok := h.apply("a", cfg(4))
	h.drain(capacity)
	h.expect(ok, "done")
	if st := h.state("a"); st.Slots != 4 || st.ConfigVersion != 2 {
		t.Fatalf("%+v", st)
	}
}

// A changed multi-slot replacement is probed; a probe that is too small or
// fails keeps the old state whole; an admission-only change commits in place.
func TestFailProbe(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	a := h.apply("a", changed(4, `{"ck":"other"}`))
	if st := h.state("a"); st.State != Reconfiguring || !st.Loaded {
		t.Fatalf("during probe: %+v", st)
	}
	h.step("a", EfStartProbe, 3, false) // capacity 3 < 4
	h.expect(a, "reject invalid_request")
	a = h.apply("a", changed(4, `{"ck":"other"}`))
	h.step("a", EfStartProbe, 0, true)
	h.expect(a, "reject backend_error")
	if st := h.state("a"); st.State != Ready || st.ConfigVersion != 1 || st.Slots != 2 {
		t.Fatalf("old state not kept: %+v", st)
	}
	meta := cfg(2)
	meta.MaxQueue = 7
	a = h.apply("a", meta)
	h.expect(a, "done")
	if len(h.jobs) != 0 || h.state("a").ConfigVersion != 2 {
		t.Fatalf("admission-only change reloaded: %v", h.log)
	}
	r := h.request("a")
	h.expect(r, "granted v2")
	// Identical spec: ensures loaded, nothing else.
	h.release(r)
	h.expect(h.apply("a", meta), "done")
	if h.state("a").ConfigVersion != 2 {
		t.Fatal("identical spec bumped the version")
	}
}

// After old teardown and commit, a failed load leaves the new metadata
// registered and unloaded; the next request retries with it.
func TestFailAfterCommit(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	a := h.apply("a", changed(2, `{"new":1}`))
	h.step("a", EfStartProbe, capacity, false)
	if st := h.state("a"); st.Loaded || st.MaxParallelSlots != 0 {
		t.Fatalf("old pool still visible during its teardown: %+v", st)
	}
	h.step("a", EfStartTeardown, 0, false)
	h.step("a", EfStartLoad, 0, true)
	h.expect(a, "reject backend_error")
	st := h.state("a")
	if st.State != Unloaded || st.ConfigVersion != 2 {
		t.Fatalf("%+v", st)
	}
	r := h.request("a")
	h.drain(capacity)
	h.expect(r, "granted v2")
}

// A clone failure tears the private sessions down before the model is
// unloaded; nothing was published; the waiting requests fail, the queued one
// retries.
func TestFailPartialClone(t *testing.T) {
	h := newHarness(t, Options{MemoryBudgetMB: 1000})
	h.register("a", cfg(3), capacity)
	unloadA(h)
	r1, r2, r3, r4 := h.request("a"), h.request("a"), h.request("a"), h.request("a")
	h.step("a", EfStartLoad, capacity, false)
	h.step("a", EfStartClone, 0, false)
	h.step("a", EfStartClone, 0, true) // the second clone fails
	h.expect(r1, "reject backend_error")
	h.expect(r2, "reject backend_error")
	h.expect(r3, "reject backend_error")
	if e, ok := h.pending("a", EfStartTeardown); !ok || e.Sessions != 2 || e.Cause != CauseFailedLoad {
		t.Fatalf("private sessions not torn down: %+v", e)
	}
	if st := h.state("a"); st.Loaded || st.State != Unloading || st.ResidentMB != 100 {
		t.Fatalf("%+v", st)
	}
	h.drain(capacity)
	h.expect(r4, "granted")
}

// The engine's capacity below the configured slots fails the first load
// with 400; a fresh registration stays registered and unloaded.
func TestFailFirstLoadUnsupported(t *testing.T) {
	h := newHarness(t, Options{})
	a := h.apply("a", cfg(4))
	if st := h.state("a"); st.State != Loading || st.ConfigVersion != 1 {
		t.Fatalf("entry not published before its first load: %+v", st)
	}
	b := h.apply("a", cfg(2)) // same-ID registration queues on the entry
	h.expect(b, "pending")
	h.step("a", EfStartLoad, 2, false)
	h.expect(a, "pending") // exclusive until its private primary is gone
	h.step("a", EfStartTeardown, 0, false)
	h.expect(a, "reject invalid_request")
	if st := h.state("a"); st.State != Reconfiguring || st.ConfigVersion != 1 {
		t.Fatalf("the queued PUT did not start right after: %+v", st)
	}
	h.drain(2)
	h.expect(b, "done")
	if st := h.state("a"); st.State != Ready || st.Slots != 2 {
		t.Fatalf("%+v", st)
	}
}

// A failed primary releases admission and residency at once; a retry works.
func TestFailNullPrimary(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 1})
	h.apply("a", cfg(1))
	h.step("a", EfStartLoad, 0, true)
	if n, _ := h.m.Residency(); n != 0 {
		t.Fatal("failed load still resident")
	}
	r := h.request("a")
	h.drain(1)
	h.expect(r, "granted")
}

// An inference failure releases the lease and keeps the order.
func TestFailExecution(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), capacity)
	r1 := h.request("a")
	u := h.manager("a", OpUnload)
	r2 := h.request("a")
	if err := h.m.Release(h.tick(), r1, true); err != nil {
		t.Fatal(err)
	}
	h.collect()
	h.run = nil
	h.expect(r2, "pending")
	h.drain(1)
	h.expect(u, "done")
	h.expect(r2, "granted")
}

// Residency refusal: 503, nothing partial; evictions already done stay done.
func TestFailResidencyRefusal(t *testing.T) {
	h := newHarness(t, Options{MemoryBudgetMB: 250})
	big := cfg(1)
	big.MemoryMB = 300
	h.expect(h.apply("huge", big), "reject server_busy")
	if st := h.state("huge"); st.State != Unloaded {
		t.Fatalf("%+v", st)
	}
	h.register("a", cfg(1), 1)
	h.register("b", cfg(1), 1)
	rb := h.request("b") // b busy, a idle
	c := cfg(1)
	c.MemoryMB = 200
	rc := h.apply("c", c) // needs both a and b gone: b is busy
	h.expect(rc, "reject server_busy")
	if st := h.state("a"); st.State != Ready {
		t.Fatalf("a evicted for a load that cannot fit: %+v", st)
	}
	h.release(rb)
}

// Slow teardown: logical residency is cleared at once; the memory stays
// charged until TeardownDone; warm work elsewhere continues.
func TestFailSlowTeardown(t *testing.T) {
	h := newHarness(t, Options{MemoryBudgetMB: 200})
	readyAB(h)
	u := h.manager("a", OpUnload)
	if st := h.state("a"); st.Loaded || st.ResidentMB != 100 {
		t.Fatalf("%+v", st)
	}
	h.expect(h.request("b"), "granted")
	c := h.apply("c", cfg(1)) // must wait for a's memory
	if _, ok := h.pending("c", EfStartLoad); ok {
		t.Fatal("retiring memory treated as free")
	}
	h.step("a", EfStartTeardown, 0, false)
	h.expect(u, "done")
	h.drain(capacity)
	h.expect(c, "done")
}
