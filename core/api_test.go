package core

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestNamesAndStrings(t *testing.T) {
	if got := strings.Join(EventNames(), ","); got != "SubmitRequest,SubmitManager,SubmitBulkUnload,Cancel,Release,LoadDone,CloneDone,ProbeDone,TeardownDone,Tick,BeginShutdown" {
		t.Fatal(got)
	}
	if len(InvariantNames()) != len(Invariants()) || len(Invariants()) != NumInvariants || InvariantNames()[0] != "CapacityBounds" {
		t.Fatal(InvariantNames())
	}
	for _, s := range []interface{ String() string }{State(99), Op(99), Code(99), Reason(99), EventKind(99), EffectKind(99), Cause(99)} {
		if !strings.Contains(s.String(), "99") {
			t.Fatalf("%T: %s", s, s)
		}
	}
	// The first value past each table falls back to its number, and every
	// value in it has its name (each String's bound is exact).
	edges := []struct {
		past  interface{ String() string }
		names []string
		name  func(i int) string
	}{
		{State(len(stateNames)), stateNames[:], func(i int) string { return State(i).String() }},
		{Op(len(opNames)), opNames[:], func(i int) string { return Op(i).String() }},
		{Code(len(codeNames)), codeNames[:], func(i int) string { return Code(i).String() }},
		{EventKind(len(eventNames)), eventNames[:], func(i int) string { return EventKind(i).String() }},
		{EffectKind(len(effectNames)), effectNames[:], func(i int) string { return EffectKind(i).String() }},
		{Cause(len(causeNames)), causeNames[:], func(i int) string { return Cause(i).String() }},
		{RejectReason(len(rejectNames)), rejectNames[:], func(i int) string { return RejectReason(i).String() }},
	}
	for _, e := range edges {
		if got, want := e.past.String(), fmt.Sprint(len(e.names)); !strings.Contains(got, "(") || !strings.Contains(got, want) {
			t.Errorf("%T past its names: %q", e.past, got)
		}
		for i, n := range e.names {
			if got := e.name(i); got != n {
				t.Errorf("%T(%d) = %q, want %q", e.past, i, got, n)
			}
		}
	}
	for _, mu := range AllMutants() {
		if back, ok := ParseMutant(mu.String()); !ok || back != mu {
			t.Fatalf("mutant %s does not round-trip", mu)
		}
	}
	if _, ok := ParseMutant("nope"); ok || Mutants(0).String() != "none" {
		t.Fatal("mutant names")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(Options{MaxLoadedModels: -1}); err == nil {
		t.Fatal("negative limit accepted")
	}
	m, _ := New(Options{IdleTimeout: 5})
	if m.Options().IdleTimeout != 5 || m.ShuttingDown() || m.Len() != 0 {
		t.Fatal("accessors")
	}
	if _, err := m.Step(Event{Kind: EventKind(99)}); err == nil {
		t.Fatal("unknown event accepted")
	}
}

func TestStaleAndUnknown(t *testing.T) {
	h := newHarness(t, Options{})
	h.apply("a", cfg(1))
	e, _ := h.pending("a", EfStartLoad)
	if err := h.m.CloneDone(h.tick(), e.Job, false); !errors.Is(err, ErrStaleJob) {
		t.Fatalf("wrong-kind completion: %v", err)
	}
	if err := h.m.TeardownDone(h.tick(), Job(99)<<32); !errors.Is(err, ErrStaleJob) {
		t.Fatalf("unknown model job: %v", err)
	}
	h.completeAll(1)
	if err := h.m.LoadDone(h.tick(), e.Job, 1, false); !errors.Is(err, ErrStaleJob) {
		t.Fatalf("repeated completion: %v", err)
	}
	if _, err := h.m.Cancel(h.tick(), Ticket(12345), ReasonDisconnect); !errors.Is(err, ErrUnknownTicket) {
		t.Fatal(err)
	}
	// A ticket one past the slab's end (never issued) is unknown, not a
	// panic: the bound check is exact.
	for _, idx := range []int{len(h.m.ts.t), len(h.m.ts.t) + 1} {
		if _, err := h.m.Cancel(h.tick(), Ticket(1<<32|uint64(idx)), ReasonDisconnect); !errors.Is(err, ErrUnknownTicket) {
			t.Fatalf("ticket at index %d: %v", idx, err)
		}
	}
	// A job or a handle exactly one past the last model is stale or
	// unknown, not a panic (both bound checks are exact).
	if err := h.m.TeardownDone(h.tick(), Job(h.m.Len())<<32|1); !errors.Is(err, ErrStaleJob) {
		t.Fatalf("job of the model one past the last: %v", err)
	}
	h.collect()
	if r := h.m.SubmitRequest(h.tick(), Handle(h.m.Len()), NoTimeout); len(h.m.Effects()) != 1 ||
		h.m.Effects()[0].Kind != EfReject || h.m.Effects()[0].Code != CodeNotFound || h.m.Effects()[0].Ticket != r {
		t.Fatalf("request for the handle one past the last: %+v", h.m.Effects())
	}
	h.collect()
	u := h.m.SubmitManager(h.tick(), "a", OpUnload, nil, NoTimeout)
	if err := h.m.Release(h.tick(), u, false); err == nil {
		t.Fatal("release of a manager accepted")
	}
	h.collect()
	if h.m.Config(h.handle("a")).Slots != 1 {
		t.Fatal("config accessor")
	}
	// Unknown model on a request submitted by value.
	tk, err := h.m.Step(Event{Kind: EvSubmitRequest, Model: "ghost"})
	h.collect()
	if err != nil || h.outcome(tk) != "reject not_found" {
		t.Fatal(h.outcome(tk))
	}
	h.expect(h.manager("ghost", OpLoad), "reject not_found")
	h.expect(h.m.SubmitRequest(h.tick(), Handle(77), NoTimeout), "pending")
	h.collect()
}

// Describe and the canonical key cover queues, managers, bulk members and
// the loader queue; two machines built by the same events have equal keys,
// and the key ignores absolute time.
func TestDescribeAndKey(t *testing.T) {
	build := func(t0 int64) *harness {
		h := newHarness(t, Options{MemoryBudgetMB: 200})
		h.now = t0
		readyAB(h)
		h.request("a")
		h.request("a")
		h.requestT("a", 5000)
		h.apply("a", changed(2, `{"z":1}`))
		h.bulkUnload("a", "b")
		h.bulkUnload("b", "a")
		h.apply("c", cfg(1))
		return h
	}
	h1, h2 := build(0), build(1e9)
	d := h1.m.Describe()
	for _, want := range []string{"queue=[req apply unload unload]", "waiting_residency", "resident=100MB", "pool=v1/2 cap=4"} {
		if !strings.Contains(d, want) {
			t.Fatalf("describe lacks %q:\n%s", want, d)
		}
	}
	if string(h1.m.AppendKey(nil)) != string(h2.m.AppendKey(nil)) {
		t.Fatal("key depends on absolute time")
	}
	if len(h1.m.Loaders()) != 1 {
		t.Fatal("loader queue")
	}
	v := h1.m.Inspect(h1.handle("a"))
	if len(v.Queue) != 4 || !v.Queue[2].Member || v.Slots[0].Slot != 0 || v.Queue[0].Deadline == 0 {
		t.Fatalf("%+v", v)
	}
	h1.shutdown()
	if !strings.Contains(h1.m.Describe(), "shutting down") {
		t.Fatal("describe shutdown")
	}
}
