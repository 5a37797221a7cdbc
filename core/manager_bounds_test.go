package core

import "testing"

// Exact edges of the manager paths that the mutation run (make mutation,
// MUTATION_FILES=manager.go) found no check pinned down.

// fail.capacity-probe: a probe that reports too small a capacity ends the
// reconfigure invalid_request, and its Reject says the build failed; the
// probe ran for the next config version.
func TestProbeTooSmallRejectReason(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	v := h.state("a").ConfigVersion
	a := h.apply("a", changed(4, `{"ck":"other"}`))
	e, ok := h.pending("a", EfStartProbe)
	if !ok {
		t.Fatalf("no probe: %v", h.log)
	}
	if e.Version != v+1 {
		t.Fatalf("probe for version %d, want %d (the config version it would commit)", e.Version, v+1)
	}
	h.step("a", EfStartProbe, 3, false)
	h.expect(a, "reject invalid_request")
	if r := h.res[a]; r.Reason != RejectLoadFailed {
		t.Fatalf("reject reason %s, want %s", r.Reason, RejectLoadFailed)
	}
}

// ops.ready.reconfigure: a single-slot config needs no capacity probe even
// when its sessions change (any engine serves one slot): the old pool is
// replaced at once.
func TestSingleSlotReconfigureSkipsProbe(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	a := h.apply("a", changed(1, `{"ck":"other"}`))
	if _, ok := h.pending("a", EfStartProbe); ok {
		t.Fatalf("probed a single-slot config: %v", h.log)
	}
	if _, ok := h.pending("a", EfStartTeardown); !ok {
		t.Fatalf("old pool not replaced: %v", h.log)
	}
	h.completeAll(capacity)
	h.expect(a, "done")
	if st := h.state("a"); st.Slots != 1 || st.State != Ready {
		t.Fatalf("after replace: %+v", st)
	}
}

// bulk.unload-a: cancelling a bulk withdraws every queued member, also the
// one in the ticket table's first entry (index 0). The free list is LIFO,
// so the setup leaves entries 0 and then y free: the bulk's parent takes y
// and its first member (on a, busy) takes 0.
func TestCancelBulkWithdrawsMemberAtIndexZero(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), capacity)
	h.register("b", cfg(1), capacity)
	ra := h.request("a") // entry 0
	rb := h.request("b")
	rx := h.request("a") // queued behind ra
	ry := h.request("b") // queued behind rb: entry y
	h.release(ra)        // frees entry 0; rx takes a's slot
	h.expect(rx, "granted")
	h.cancel(ry, ReasonDisconnect) // frees y after 0
	bk := h.bulkUnload("a", "b")
	if tk := &h.m.ts.t[0]; tk.kind != tkManager || tk.parent < 0 || tk.phase != phQueued {
		t.Fatalf("setup: entry 0 is not a queued bulk member\n%s", h.m.Describe())
	}
	h.cancel(bk, ReasonDisconnect)
	for i := range h.m.ts.t {
		if tk := &h.m.ts.t[i]; tk.kind == tkManager && tk.parent >= 0 {
			t.Fatalf("member at entry %d still live after its bulk was cancelled\n%s", i, h.m.Describe())
		}
	}
	h.release(rx)
	h.release(rb)
	h.drain(capacity)
	if st := h.state("a"); !st.Loaded {
		t.Fatalf("a withdrawn member unloaded a: %+v", st)
	}
}

// ops.ready.reconfigure: a targeted manager's Done carries the model's
// status at the moment it finished (the runtime answers the PUT with it);
// a bulk's members finish without an effect of their own.
func TestManagerDoneCarriesStatus(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	meta := cfg(2)
	meta.MaxQueue = 7
	a := h.apply("a", meta)
	h.expect(a, "done")
	st := h.res[a].Status
	if st == nil || st.ConfigVersion != 2 || st.State != Ready || !st.Loaded {
		t.Fatalf("Done's status %+v, want version 2, ready and loaded", st)
	}
	u := h.manager("a", OpUnload)
	h.completeAll(capacity)
	h.expect(u, "done")
	if st := h.res[u].Status; st == nil || st.Loaded {
		t.Fatalf("unload's Done status %+v, want unloaded", st)
	}
}
