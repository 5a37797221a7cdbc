package core

import (
	"strings"
	"testing"
)

// Edges the whole-core mutation run found unpinned (survivors at
// fb610b5): each test sits exactly on a comparison's boundary, from both
// sides where both exist.

// TestIdleRetireExactEdge: a model idle for one nanosecond less than
// Options.IdleTimeout stays; idle for exactly IdleTimeout it retires
// (CONTRACT.md res.idle-retirement). Its lastUsed is far from 0, so a clock that
// added instead of subtracting would retire it at once.
func TestIdleRetireExactEdge(t *testing.T) {
	const idle = 500
	h := newHarness(t, Options{IdleTimeout: idle})
	h.now = 1_000_000
	h.register("a", cfg(1), 1)
	last := h.m.Inspect(h.handle("a")).LastUsed
	if last < 1_000_000 {
		t.Fatalf("lastUsed %d", last)
	}
	h.m.Tick(last + idle - 1)
	if effs := h.collect(); len(effs) != 0 || h.state("a").State != Ready {
		t.Fatalf("retired one nanosecond early: %v", h.log)
	}
	h.m.Tick(last + idle)
	var retired bool
	for _, e := range h.collect() {
		retired = retired || (e.Kind == EfStartTeardown && e.Cause == CauseIdle)
	}
	if !retired {
		t.Fatalf("not retired at exactly the idle timeout: %v", h.log)
	}
}

// TestExplicitZeroTimeoutIsUnbounded: a request's override of 0 means
// "wait without bound", also when its model has a timeout of its own; only a
// negative override (NoTimeout) falls back to the model's. The same holds one
// level down: a model's 0 is unbounded, and only its NoTimeout falls back to
// the server's default (CONTRACT.md time.timeout-precedence).
func TestExplicitZeroTimeoutIsUnbounded(t *testing.T) {
	h := newHarness(t, Options{DefaultAdmissionTimeout: 7000})
	c := cfg(1)
	c.AdmissionTimeout = 5000
	h.register("a", c, 1)
	zero := cfg(1)
	zero.AdmissionTimeout = 0
	h.register("b", zero, 1)
	h.register("c", cfg(1), 1)
	for _, id := range []string{"a", "b", "c"} {
		h.request(id) // takes the one slot
		h.requestT(id, 0)
		h.requestT(id, NoTimeout)
	}
	for id, want := range map[string]int64{"a": 5000, "b": 0, "c": 7000} {
		q := h.m.Inspect(h.handle(id)).Queue
		if len(q) != 2 || q[0].Deadline != 0 {
			t.Fatalf("%s: explicit 0 is bounded: %+v", id, q)
		}
		if got := q[1].Deadline; (want == 0 && got != 0) || (want > 0 && got != q[1].Since+want) {
			t.Fatalf("%s: default deadline %d, want since+%d: %+v", id, got, want, q)
		}
	}
}

// TestFailFastAtExactlyTheTimeout: a bounded request that arrives when every
// occupied slot has been held exactly its timeout fails fast with
// server_busy; one nanosecond sooner it queues (CONTRACT.md
// time.overdue-blockers).
func TestFailFastAtExactlyTheTimeout(t *testing.T) {
	const d = 3000
	h := newHarness(t, Options{})
	h.register("a", cfg(1), 1)
	run := h.request("a")
	since := h.m.Inspect(h.handle("a")).Slots[0].Since
	if h.outcome(run) != "granted v1" {
		t.Fatalf("%v", h.log)
	}
	early := h.m.SubmitRequest(since+d-1, h.handle("a"), d)
	h.collect()
	if _, ended := h.res[early]; ended {
		t.Fatalf("failed fast one nanosecond early: %v", h.log)
	}
	late := h.m.SubmitRequest(since+d, h.handle("a"), d)
	h.collect()
	if e, ok := h.res[late]; !ok || e.Kind != EfReject || e.Code != CodeServerBusy {
		t.Fatalf("not failed fast at exactly the timeout: %v", h.log)
	}
}

// TestEvictTieGoesToFirstRegistered: among resident models last used at the
// same instant, eviction picks the first registered, so that a tie is
// decided the same way on every run (CONTRACT.md ops.ready.evict).
func TestEvictTieGoesToFirstRegistered(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 2})
	h.register("a", cfg(1), 1)
	h.register("b", cfg(1), 1)
	lazy := cfg(1)
	lazy.RegisterOnly = true
	h.apply("c", lazy)
	ra, rb := h.request("a"), h.request("b")
	same := h.tick()
	for _, tk := range []Ticket{ra, rb} {
		if err := h.m.Release(same, tk, false); err != nil {
			t.Fatal(err)
		}
	}
	h.run = nil
	h.collect()
	if la, lb := h.m.Inspect(h.handle("a")).LastUsed, h.m.Inspect(h.handle("b")).LastUsed; la != lb {
		t.Fatalf("no tie: %d %d", la, lb)
	}
	h.request("c")
	var evicted []string
	for _, e := range h.jobs {
		if e.Kind == EfStartTeardown && e.Cause == CauseEvict {
			evicted = append(evicted, h.m.Inspect(e.Model).ID)
		}
	}
	if len(evicted) != 1 || evicted[0] != "a" {
		t.Fatalf("evicted %v, want [a]: %v", evicted, h.log)
	}
}

// TestTicketViewSlots: Inspect shows a running request's slot and -1 for a
// queued one; the dashboard and the simulator's oracle read these.
func TestTicketViewSlots(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), 2)
	h.request("a")
	h.request("a")
	h.request("a")
	v := h.m.Inspect(h.handle("a"))
	if len(v.Slots) != 2 || v.Slots[0].Slot != 0 || v.Slots[1].Slot != 1 || v.Slots[1].Phase != "running" {
		t.Fatalf("slots %+v", v.Slots)
	}
	if len(v.Queue) != 1 || v.Queue[0].Slot != -1 || v.Queue[0].Phase != "queued" || v.Queue[0].Member || v.Queue[0].Kind != "request" {
		t.Fatalf("queue %+v", v.Queue)
	}
}

// TestOrderInvariantsCatchCorruption: the FIFO and barrier invariants fire
// on a state that breaks them. A correct core never reaches such a state, so
// without this test a weakened invariant passes every check (the mutation
// run's survivors in invariants.go). Each case corrupts one sequence number
// of a fresh machine: model a with one slot, a running request, then a
// queued unload manager, then a queued request; model b with one slot, a
// running request and a queued one.
func TestOrderInvariantsCatchCorruption(t *testing.T) {
	setup := func(t *testing.T) (m *Machine, a, b ModelView) {
		h := newHarness(t, Options{})
		h.register("a", cfg(1), 1)
		h.register("b", cfg(1), 1)
		h.request("a")
		h.manager("a", OpUnload)
		h.request("a")
		h.request("b")
		h.request("b")
		b = h.m.Inspect(h.handle("b"))
		v := h.m.Inspect(h.handle("a"))
		if len(v.Slots) != 1 || len(v.Queue) != 2 || v.Queue[0].Kind != "manager" || v.Queue[1].Kind != "request" {
			t.Fatalf("setup: %s", h.m.Describe())
		}
		for _, c := range []func(*Machine) error{checkNoBarging, checkFIFOAdmission} {
			if err := c(h.m); err != nil {
				t.Fatalf("setup: %v", err)
			}
		}
		return h.m, v, b
	}
	bySeq := func(m *Machine, seq uint64) *ticket {
		for i := range m.ts.t {
			if m.ts.t[i].seq == seq && m.ts.t[i].kind != 0 {
				return &m.ts.t[i]
			}
		}
		t.Fatalf("no ticket with seq %d", seq)
		return nil
	}
	for _, c := range []struct {
		name    string
		corrupt func(m *Machine, a, b ModelView)
		check   func(*Machine) error
		want    string
	}{
		{"running request past the waiting manager", func(m *Machine, v, _ ModelView) {
			bySeq(m, v.Slots[0].Seq).seq = v.Queue[0].Seq + 1
		}, checkNoBarging, "admitted past waiting manager"},
		{"queue out of arrival order", func(m *Machine, v, _ ModelView) {
			bySeq(m, v.Queue[1].Seq).seq = v.Queue[0].Seq - 1
		}, checkFIFOAdmission, "out of arrival order"},
		{"running request later than a queued one", func(m *Machine, v, _ ModelView) {
			bySeq(m, v.Slots[0].Seq).seq = v.Queue[1].Seq + 1
		}, checkFIFOAdmission, "admitted before earlier"},
		{"running request later than a queued one, no manager", func(m *Machine, _, b ModelView) {
			bySeq(m, b.Slots[0].Seq).seq = b.Queue[0].Seq + 1
		}, checkFIFOAdmission, "admitted before earlier"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, a, b := setup(t)
			c.corrupt(m, a, b)
			if err := c.check(m); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestQueueProgressCatchesAStalledHead: a request at the head of a model
// with a spare slot and no manager is a stalled queue; QueueProgress fires on
// it (the corruption raises the slot count of a full one-slot model).
func TestQueueProgressCatchesAStalledHead(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), 1)
	h.request("a")
	h.request("a")
	if err := checkQueueProgress(h.m); err != nil {
		t.Fatalf("setup: %v", err)
	}
	md := &h.m.models[h.handle("a")]
	c := *md.cfg
	c.Slots = 2
	md.cfg = &c
	if err := checkQueueProgress(h.m); err == nil || !strings.Contains(err.Error(), "request at the head could take a slot") {
		t.Fatalf("got %v", err)
	}
}
