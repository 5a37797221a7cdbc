package core

import "testing"

// A configuration whose load fails backs off (CONTRACT.md fail.load-backoff):
// requests that would start its load are refused server_busy with the
// remaining backoff, which doubles with each failure up to the cap; a Tick
// past it lets the next request load; a granted manager and a successful
// load end it.
func TestLoadBackoff(t *testing.T) {
	const base, ceil = 10_000, 25_000 // the harness clock advances 1000 a step
	h := newHarness(t, Options{LoadBackoff: base, LoadBackoffMax: ceil})
	h.register("a", cfg(1), 1)
	h.manager("a", OpUnload)
	h.completeAll(1)

	r1 := h.request("a")
	r2 := h.request("a") // queued behind r1 (one slot)
	h.step("a", EfStartLoad, 0, true)
	failedAt := h.now
	h.expect(r1, "reject backend_error")
	h.expect(r2, "reject server_busy") // it would start the load again
	if e := h.res[r2]; e.RetryAfter != base {
		t.Fatalf("queued request's RetryAfter %d, want %d", e.RetryAfter, base)
	}
	st := h.state("a")
	if st.LoadFailures != 1 || st.BackoffUntil != failedAt+base || st.State != Unloaded {
		t.Fatalf("status after one failure: %+v", st)
	}
	r3 := h.request("a")
	h.expect(r3, "reject server_busy")
	if e := h.res[r3]; e.RetryAfter != failedAt+base-h.now {
		t.Fatalf("RetryAfter %d, want the remaining %d", e.RetryAfter, failedAt+base-h.now)
	}
	if _, ok := h.pending("a", EfStartLoad); ok {
		t.Fatal("a load started while backing off")
	}
	if nd := h.m.NextDeadline(); nd != failedAt+base {
		t.Fatalf("NextDeadline %d, want the backoff's end %d", nd, failedAt+base)
	}

	// Past the backoff the next request loads; a second failure doubles it.
	h.now = failedAt + base
	h.m.Tick(h.now)
	h.collect()
	if st := h.state("a"); st.BackoffUntil != 0 || st.LoadFailures != 1 {
		t.Fatalf("after the backoff: %+v", st)
	}
	r4 := h.request("a")
	h.step("a", EfStartLoad, 0, true)
	h.expect(r4, "reject backend_error")
	if st := h.state("a"); st.LoadFailures != 2 || st.BackoffUntil != h.now+2*base {
		t.Fatalf("after two failures: %+v, now %d", st, h.now)
	}
	// A third doubles to 40000, capped at 25000.
	h.now += 2 * base
	h.m.Tick(h.now)
	h.collect()
	r5 := h.request("a")
	h.step("a", EfStartLoad, 1, false)
	h.expect(r5, "granted")
	if st := h.state("a"); st.LoadFailures != 0 || st.BackoffUntil != 0 {
		t.Fatalf("a successful load keeps the backoff: %+v", st)
	}
	h.release(r5)

	// Capacity below slots is a failed load too; the cap holds.
	ap := h.apply("a", changed(2, `{"c":1}`))
	h.step("a", EfStartProbe, 2, false)
	h.step("a", EfStartTeardown, 0, false)
	h.step("a", EfStartLoad, 1, false) // the replacement opens with capacity 1 < 2 slots
	h.step("a", EfStartTeardown, 0, false)
	h.expect(ap, "reject invalid_request")
	for k := 0; k < 2; k++ {
		st := h.state("a")
		h.now = st.BackoffUntil
		h.m.Tick(h.now)
		h.collect()
		r := h.request("a")
		h.step("a", EfStartLoad, 1, false)
		failedAt = h.now
		h.step("a", EfStartTeardown, 0, false)
		h.expect(r, "reject invalid_request")
	}
	if st := h.state("a"); st.LoadFailures != 3 || st.BackoffUntil != failedAt+ceil {
		t.Fatalf("third failure: %+v, want until %d+%d", st, failedAt, ceil)
	}

	// A manager ends the backoff and loads at once.
	rb := h.request("a")
	h.expect(rb, "reject server_busy")
	ld := h.manager("a", OpLoad)
	if st := h.state("a"); st.LoadFailures != 0 || st.BackoffUntil != 0 || st.State != Loading {
		t.Fatalf("a granted manager keeps the backoff: %+v", st)
	}
	h.step("a", EfStartLoad, 1, false)
	failedAt = h.now
	h.step("a", EfStartTeardown, 0, false)
	h.expect(ld, "reject invalid_request")
	if st := h.state("a"); st.LoadFailures != 1 || st.BackoffUntil != failedAt+base {
		t.Fatalf("the manager's failure starts at the base again: %+v", st)
	}
}

// A residency refusal is no failed load: no backoff.
func TestLoadBackoffNotForResidency(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 1, LoadBackoff: 10_000})
	h.register("a", cfg(1), 1)
	ra := h.request("a") // a busy: no victim
	h.apply("b", cfg(1))
	h.completeAll(1)
	if st := h.state("b"); st.LoadFailures != 0 || st.BackoffUntil != 0 {
		t.Fatalf("residency refusal backs off: %+v", st)
	}
	h.release(ra)
	rb := h.request("b")
	h.completeAll(1)
	h.expect(rb, "granted")
}

// Without LoadBackoff failures are counted but nothing is refused.
func TestLoadBackoffDisabled(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), 1)
	h.manager("a", OpUnload)
	h.completeAll(1)
	r1 := h.request("a")
	r2 := h.request("a")
	h.step("a", EfStartLoad, 0, true)
	h.expect(r1, "reject backend_error")
	h.expect(r2, "pending") // it retries the load
	if st := h.state("a"); st.LoadFailures != 1 || st.BackoffUntil != 0 {
		t.Fatalf("status: %+v", st)
	}
	h.step("a", EfStartLoad, 1, false)
	h.expect(r2, "granted")
}
