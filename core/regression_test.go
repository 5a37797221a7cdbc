package core

import (
	"strings"
	"testing"
)

// Named regressions for bugs that hurt the users of other model servers.

// An eviction victim revived by a new request must not hang the loader: the
// loader that evicted v gets v's memory when v's teardown ends, and v's new
// request waits for v's reload instead of blocking the loader.
func TestRegressionRevivedVictimDoesNotHangLoader(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 1})
	h.register("v", cfg(1), 1)
	h.apply("l", cfg(1)) // registers l: needs v's residency, evicts it
	if st := h.state("v"); st.State != Unloading {
		t.Fatalf("v not evicted: %+v", st)
	}
	rv := h.request("v") // revives the victim while it tears down
	h.expect(rv, "pending")
	h.step("v", EfStartTeardown, 0, false)
	if _, ok := h.pending("l", EfStartLoad); !ok {
		t.Fatalf("loader hangs after the victim's teardown: %s", h.m.Describe())
	}
	// l is loading, so it is no victim: v's reload is refused (503), never
	// left hanging; a retry once l is idle evicts l and runs.
	h.expect(rv, "reject server_busy")
	h.drain(1)
	if st := h.state("l"); st.State != Ready {
		t.Fatalf("loader did not finish: %+v", st)
	}
	again := h.request("v")
	h.drain(1)
	h.expect(again, "granted")
}

// A reload barrier must not starve under a steady stream of requests: once
// the manager is queued, no later request takes a slot until it ran.
func TestRegressionBarrierDoesNotStarve(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	r1, r2 := h.request("a"), h.request("a")
	ld := h.apply("a", changed(2, `{"reload":1}`))
	var later []Ticket
	for i := 0; i < 50; i++ { // a steady stream, with releases in between
		later = append(later, h.request("a"))
		if i == 10 {
			h.release(r1)
		}
		if i == 20 {
			h.release(r2)
		}
	}
	for _, r := range later {
		h.expect(r, "pending")
	}
	if _, ok := h.pending("a", EfStartProbe); !ok {
		t.Fatal("the barrier did not start after the earlier requests drained")
	}
	h.drain(capacity)
	h.expect(ld, "done")
	for _, r := range later {
		h.expect(r, "granted v2")
	}
}

// Two loaders must not pick the same victim and lose a wakeup: with room for
// two models and two idle residents, two cold loads evict one victim each;
// a later loader waiting on a retiring victim wakes at its teardown.
func TestRegressionTwoLoadersDistinctVictims(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 2})
	readyAB(h)
	for _, id := range []string{"c", "d"} {
		h.apply(id, cfg(1))
		h.manager(id, OpUnload)
	}
	h.drain(capacity)
	h.register("a", cfg(2), capacity)
	h.register("b", cfg(2), capacity)
	mark := len(h.log)
	rc := h.request("c")
	rd := h.request("d")
	h.drain(capacity)
	h.expect(rc, "granted")
	h.expect(rd, "granted")
	victims := map[string]int{}
	for _, l := range h.log[mark:] {
		if strings.HasPrefix(l, "StartTeardown") && strings.HasSuffix(l, "cause=evict") {
			victims[strings.Fields(l)[1]]++
		}
	}
	if len(victims) != 2 || victims["a"] != 1 || victims["b"] != 1 {
		t.Fatalf("victims %v; log %v", victims, h.log[mark:])
	}
}

// A queue limit must count requests waiting for slots of a loaded model, not
// only those waiting for a cold load.
func TestRegressionQueueLimitCountsWarmWaiters(t *testing.T) {
	h := newHarness(t, Options{})
	c := cfg(1)
	c.MaxQueue = 2
	h.register("a", c, capacity)
	r0 := h.request("a") // takes the slot of the loaded model
	q1, q2 := h.request("a"), h.request("a")
	over := h.request("a")
	h.expect(q1, "pending")
	h.expect(q2, "pending")
	h.expect(over, "reject server_busy")
	if st := h.state("a"); st.QueuedRequests != 2 || st.ActiveSlots != 1 {
		t.Fatalf("%+v", st)
	}
	h.release(r0)
	h.drain(capacity)
}

// Found by the seeded workload: a retired pool's session count survived its
// teardown, so a later smaller config looked over-built.
func TestRegressionRetireForgetsBuiltSessions(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(3), capacity)
	h.manager("a", OpUnload)
	h.drain(capacity)
	h.apply("a", cfg(2)) // probes; commits 2 slots over an unloaded entry
	h.drain(capacity)
	if st := h.state("a"); st.Slots != 2 || st.State != Ready {
		t.Fatalf("%+v", st)
	}
}

// Found in review: when the first waiter of a pending load disconnects and a
// queued request takes its slot, the load keeps its place in the loader
// queue instead of going behind a later loader.
func TestRegressionWithdrawnLoadKeepsPlace(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 1})
	h.register("a", cfg(1), 1)
	for _, id := range []string{"b", "c"} {
		h.apply(id, cfg(1))
		h.drain(1)
		h.manager(id, OpUnload)
		h.drain(1)
	}
	h.register("a", cfg(1), 1)
	b1 := h.request("b") // evicts a, waits
	b2 := h.request("b") // queued behind b1
	rc := h.request("c") // a later loader
	h.cancel(b1, ReasonDisconnect)
	if l := h.m.Loaders(); len(l) != 2 || h.m.ID(l[0]) != "b" {
		t.Fatalf("loader queue %v", l)
	}
	h.drain(1)
	h.expect(b2, "granted")
	h.expect(rc, "reject server_busy") // b is busy when c's turn comes
}

// Found in review: a reconfigure's old-pool teardown frees memory like an
// unload does, so a waiting loader waits instead of being refused.
func TestRegressionReconfigureTeardownCountsAsRetiring(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 2})
	readyAB(h)
	rb := h.request("b")
	h.apply("a", changed(2, `{"ck":"new"}`))
	h.step("a", EfStartProbe, capacity, false) // a's old pool is now tearing down
	rc := h.apply("c", cfg(1))
	h.expect(rc, "pending")
	h.release(rb)
	h.drain(capacity)
	h.expect(rc, "done")
}

// Targeted managers fail fast like requests when every occupied slot is
// overdue.
func TestRegressionManagerFailsFastOnOverdue(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), capacity)
	r := h.request("a")
	h.now += 1_000_000
	u := h.m.SubmitManager(h.tick(), "a", OpUnload, nil, 1000)
	h.collect()
	h.expect(u, "reject server_busy")
	h.release(r)
}
