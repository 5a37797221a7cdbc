package core

import "testing"

// Matrix "Timeout, disconnect and shutdown".

func TestTimeAdmissionTimeout(t *testing.T) {
	h := newHarness(t, Options{DefaultAdmissionTimeout: 10_000})
	h.register("a", cfg(1), capacity)
	r0 := h.request("a")
	r := h.request("a")
	mg := h.manager("a", OpLoad)
	if d := h.m.NextDeadline(); d == 0 {
		t.Fatal("no deadline")
	}
	h.m.Tick(h.now + 20_000)
	h.collect()
	h.expect(r, "reject server_busy")
	h.expect(mg, "reject server_busy")
	if st := h.state("a"); st.QueuedRequests != 0 || st.QueuedManagers != 0 || st.ActiveSlots != 1 {
		t.Fatalf("%+v", st)
	}
	h.release(r0) // existing work continued
}

func TestTimeEffectiveTimeout(t *testing.T) {
	h := newHarness(t, Options{DefaultAdmissionTimeout: 50, AdmissionCeiling: 100})
	c := cfg(1)
	c.AdmissionTimeout = 70
	h.register("a", c, 1)
	m := h.m
	md := &m.models[h.handle("a")]
	for _, tc := range []struct{ over, want int64 }{{NoTimeout, 70}, {0, 100}, {30, 30}, {500, 100}} {
		if got := m.effectiveTimeout(md, tc.over); got != tc.want {
			t.Fatalf("override %d: %d, want %d", tc.over, got, tc.want)
		}
	}
	md.cfg = cfg(1)
	if got := m.effectiveTimeout(md, NoTimeout); got != 50 {
		t.Fatalf("server default: %d", got)
	}
}

// All occupied slots overdue: fail fast even with a queued manager in front;
// one healthy slot: wait.
func TestTimeOverdueBlockers(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	r1 := h.request("a")
	h.now += 100_000
	r2 := h.request("a")
	h.manager("a", OpUnload)
	wait := h.requestT("a", 50_000) // r2 is healthy
	h.expect(wait, "pending")
	h.now += 100_000
	fast := h.requestT("a", 50_000) // both overdue
	h.expect(fast, "reject server_busy")
	unbounded := h.requestT("a", 0)
	h.expect(unbounded, "pending")
	h.release(r1)
	h.release(r2)
	h.drain(capacity)
}

// Zero timeout waits without bound; bulk unloads ignore the policy.
func TestTimeZeroAndBulk(t *testing.T) {
	h := newHarness(t, Options{DefaultAdmissionTimeout: 10})
	h.register("a", cfg(1), capacity)
	r0 := h.request("a")
	z := h.requestT("a", 0)
	b := h.bulkUnload("a")
	h.m.Tick(h.now + 1e9)
	h.collect()
	h.expect(z, "pending")
	h.expect(b, "pending")
	h.release(r0)
	h.drain(capacity)
	h.expect(b, "done")
	h.expect(z, "granted")
}

// The seed's gap, closed: a disconnected client leaves the queue at once;
// one waiting for initialization gives its slot back at once, and the last
// one withdraws a load that has not started.
func TestTimeDisconnectQueuedAndWaitingInit(t *testing.T) {
	h := newHarness(t, Options{SerializeColdLoads: true})
	readyAB(h)
	h.bulkUnload("a", "b")
	h.drain(capacity)
	rb := h.request("b") // b's load runs; the guard holds a's
	r1 := h.request("a")
	r2 := h.request("a")
	r3 := h.request("a")
	if st := h.state("a"); st.ActiveSlots != 2 || st.QueuedRequests != 1 {
		t.Fatalf("%+v", st)
	}
	if !h.cancel(r3, ReasonDisconnect) || h.state("a").QueuedRequests != 0 {
		t.Fatal("queued waiter not removed at once")
	}
	if ok := h.cancel(r1, ReasonTimeout); ok {
		t.Fatal("a timeout cancelled an admitted request")
	}
	h.cancel(r1, ReasonDisconnect)
	h.expect(r1, "reject cancelled")
	if st := h.state("a"); st.ActiveSlots != 1 || st.State != Loading {
		t.Fatalf("%+v", st)
	}
	h.cancel(r2, ReasonDisconnect)
	if st := h.state("a"); st.ActiveSlots != 0 || st.State != Unloaded || len(h.m.Loaders()) != 0 {
		t.Fatalf("unwanted load not withdrawn: %+v", st)
	}
	h.drain(capacity)
	h.expect(rb, "granted")
	if h.state("a").State != Unloaded {
		t.Fatal("a loaded for nobody")
	}
}

// A running request or a granted manager is not cancelled by the core: the
// shell releases the lease; the manager runs to completion.
func TestTimeDisconnectExecuting(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), capacity)
	r := h.request("a")
	if h.cancel(r, ReasonDisconnect) {
		t.Fatal("running request cancelled")
	}
	h.release(r)
	if err := h.m.Release(h.tick(), r, false); err == nil {
		t.Fatal("second release accepted")
	}
	u := h.manager("a", OpUnload)
	if h.cancel(u, ReasonDisconnect) {
		t.Fatal("granted manager cancelled")
	}
	h.drain(capacity)
	h.expect(u, "done")
}

// Shutdown with a queued request, a cold load and a manager: queued work is
// refused at once; the load and the manager finish; then everything is torn
// down.
func TestTimeShutdownQueuedColdLoadManager(t *testing.T) {
	h := newHarness(t, Options{})
	readyAB(h)
	unloadA(h)
	cold := h.request("a")
	queued := h.request("a")
	queued2 := h.request("a")
	rb := h.request("b")
	mgr := h.manager("b", OpUnload) // queued behind rb
	h.expect(rb, "granted")
	h.apply("c", cfg(1)) // a granted registration, loading
	h.shutdown()
	h.expect(queued2, "reject shutting_down")
	h.expect(mgr, "reject shutting_down")
	h.expect(cold, "pending")
	h.expect(queued, "pending") // admitted, waiting for init
	h.drain(capacity)
	h.expect(cold, "granted")
	if !h.done {
		t.Fatalf("no ShutdownComplete: %s", h.m.Describe())
	}
	for _, id := range []string{"a", "b", "c"} {
		if h.state(id).State != Unloaded {
			t.Fatalf("%s still resident", id)
		}
	}
}

// Idle retirement on Tick takes only idle, queue-free ready models.
func TestTimeIdleRetirement(t *testing.T) {
	h := newHarness(t, Options{IdleTimeout: 1000})
	readyAB(h)
	r := h.request("b")
	next := h.m.NextDeadline()
	if next == 0 {
		t.Fatal("no idle deadline")
	}
	h.m.Tick(next)
	h.collect()
	if a, b := h.state("a"), h.state("b"); a.State != Unloading || b.State != Ready {
		t.Fatalf("%+v %+v", a, b)
	}
	h.release(r)
	h.drain(capacity)
}
