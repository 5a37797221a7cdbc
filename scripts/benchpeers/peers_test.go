package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends/fixture"
)

// The stand-ins' logic, checked with the fixture's gates (no latencies, no
// sleeps): each test shows the scheduling behaviour its design's doc
// claims.

func testEnv(t *testing.T, slots ...int) (*countingEngine, *fixture.Engine, models) {
	t.Helper()
	fx := fixture.New()
	eng := newCountingEngine("bench-fixture", fx)
	specs := models{}
	for i, n := range slots {
		id := string(rune('a' + i))
		specs[id] = fx0(n).backendSpec(id, "", 1)
	}
	return eng, fx, specs
}

func fx0(slots int) specBody { return fx("bench-fixture", slots, 0, 0, "") }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func gated(name string) json.RawMessage { return json.RawMessage(`{"gate":"` + name + `"}`) }

// recv receives from c, or fails the test when ctx ends first.
func recv[T any](t *testing.T, ctx context.Context, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-ctx.Done():
		t.Fatal("timed out waiting for the stand-in")
		panic("unreachable")
	}
}

// async runs f and returns a channel of its error.
func async(f func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

func TestSerialHoldsTheGlobalLockAcrossModels(t *testing.T) {
	ctx := testCtx(t)
	eng, fx, specs := testEnv(t, 2, 2)
	s := newSerial(eng, specs, 0)
	defer s.close()
	a := async(func() error { _, err := s.infer(ctx, "a", gated("g")); return err })
	if err := fx.Gates().AwaitWaiting(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	if s.mu.TryLock() {
		t.Fatal("the global mutex is free while a request of model a runs")
	}
	b := async(func() error { _, err := s.infer(ctx, "b", json.RawMessage(`{}`)); return err })
	fx.Gates().Open("g")
	for _, c := range []<-chan error{a, b} {
		if err := recv(t, ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if got := eng.Loads(); got != 2 {
		t.Fatalf("loads = %d, want 2", got)
	}
}

func TestSerialEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := testCtx(t)
	eng, _, specs := testEnv(t, 1, 1, 1)
	s := newSerial(eng, specs, 2)
	defer s.close()
	for _, m := range []string{"a", "b", "a", "c", "a"} {
		if _, err := s.infer(ctx, m, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if got := eng.Loads(); got != 3 { // a, b, c (evicting b); a stays
		t.Fatalf("loads = %d, want 3", got)
	}
}

func TestOllamaQueueLimitIsBypassedByALoadedModel(t *testing.T) {
	ctx := testCtx(t)
	eng, fx, specs := testEnv(t, 1)
	events := make(chan string, 16)
	s := newOllamaLike(eng, specs, 0, 1, func(e string) { events <- e })
	defer s.close()
	if _, err := s.infer(ctx, "a", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	held := async(func() error { _, err := s.infer(ctx, "a", gated("g")); return err })
	if err := fx.Gates().AwaitWaiting(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	recv(t, ctx, events)
	// OLLAMA_MAX_QUEUE is 1, yet three more requests are each handed the
	// runner and wait for its one slot outside the queue.
	var waiting []<-chan error
	for range 3 {
		waiting = append(waiting, async(func() error { _, err := s.infer(ctx, "a", json.RawMessage(`{}`)); return err }))
		if e := recv(t, ctx, events); e != "handout" {
			t.Fatalf("event %q, want handout", e)
		}
	}
	fx.Gates().Open("g")
	for _, c := range append(waiting, held) {
		if err := recv(t, ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOllamaRefusesWhenThePendingQueueIsFull(t *testing.T) {
	ctx := testCtx(t)
	eng, fx, specs := testEnv(t, 1, 1)
	events := make(chan string, 16)
	s := newOllamaLike(eng, specs, 1, 1, func(e string) { events <- e })
	defer s.close()
	held := async(func() error { _, err := s.infer(ctx, "a", gated("g")); return err })
	if err := fx.Gates().AwaitWaiting(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	// b needs a's room: the loop waits for a's unload, and every other
	// request, whatever its model, waits in the pending queue behind it.
	b := async(func() error { _, err := s.infer(ctx, "b", json.RawMessage(`{}`)); return err })
	for recv(t, ctx, events) != "wait-unload" {
	}
	queued := &llmRequest{ctx: ctx, model: "a", success: make(chan *runnerRef, 1), errCh: make(chan error, 1)}
	s.pending <- queued // fills the queue of one: the blocked loop does not read it
	if _, err := s.infer(ctx, "a", json.RawMessage(`{}`)); !errors.Is(err, errBusy) {
		t.Fatalf("request with a full pending queue: %v, want errBusy", err)
	}
	fx.Gates().Open("g")
	if err := recv(t, ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, ctx, b); err != nil {
		t.Fatal(err)
	}
	select { // a is loaded again for the queued request (b is idle and evicted)
	case r := <-queued.success:
		s.done(r)
	case err := <-queued.errCh:
		t.Fatal(err)
	}
	if got := eng.Loads(); got != 3 {
		t.Fatalf("loads = %d, want 3 (a, b, a again)", got)
	}
}

func TestOllamaReconfigureReloads(t *testing.T) {
	ctx := testCtx(t)
	eng, _, specs := testEnv(t, 1)
	s := newOllamaLike(eng, specs, 0, 0, nil)
	defer s.close()
	if _, err := s.infer(ctx, "a", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.apply(ctx, "a", fx0(1).backendSpec("a", "", 0)); err != nil {
		t.Fatal(err)
	}
	got, err := s.infer(ctx, "a", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || eng.Loads() != 2 {
		t.Fatalf("after a reconfigure: version %d, loads %d; want 2, 2", got.Version, eng.Loads())
	}
}

func TestSwapStopsTheOtherModelAfterItsRequests(t *testing.T) {
	ctx := testCtx(t)
	eng, fx, specs := testEnv(t, 1, 1)
	s := newSwapLike(eng, specs, 0, nil)
	defer s.close()
	a := async(func() error { _, err := s.infer(ctx, "a", gated("g")); return err })
	if err := fx.Gates().AwaitWaiting(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	b := async(func() error { _, err := s.infer(ctx, "b", json.RawMessage(`{}`)); return err })
	fx.Gates().Open("g")
	for _, c := range []<-chan error{a, b} {
		if err := recv(t, ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.procs["a"].state; st != stateStopped {
		t.Fatalf("a's process is %v after the swap to b, want stopped", st)
	}
	if _, err := s.infer(ctx, "a", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got := eng.Loads(); got != 3 {
		t.Fatalf("loads = %d, want 3 (a, b, a)", got)
	}
}

func TestSwapRefusesBeyondTheConcurrencyLimit(t *testing.T) {
	ctx := testCtx(t)
	eng, fx, specs := testEnv(t, 1)
	admitted := make(chan string, 4)
	s := newSwapLike(eng, specs, 1, func(e string) { admitted <- e }) // limit: 1 slot + 1
	defer s.close()
	var held []<-chan error
	for _, g := range []string{"g1", "g2"} {
		held = append(held, async(func() error { _, err := s.infer(ctx, "a", gated(g)); return err }))
		recv(t, ctx, admitted)
	}
	// Both hold the limit's places (one runs, one waits for the slot): the
	// third is refused at once.
	if _, err := s.infer(ctx, "a", json.RawMessage(`{}`)); !errors.Is(err, errBusy) {
		t.Fatalf("third request: %v, want errBusy", err)
	}
	fx.Gates().Open("g1")
	fx.Gates().Open("g2")
	for _, c := range held {
		if err := recv(t, ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTableRatios(t *testing.T) {
	tb := newTable([]string{"sluice", "serial"})
	tb.add("sluice", []figure{{row: "x", value: 10}, {row: "y", value: 0, note: "2 refused"}})
	tb.add("serial", []figure{{row: "x", value: 25}, {row: "y", value: 7}})
	out := tb.String()
	for _, want := range []string{"| x | 10 | 25 (2.50x) |", "| y | 0 [2 refused] | 7 (+7) |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if got := pct([]time.Duration{5, 1, 3, 2, 4}, 50); got != 3 {
		t.Errorf("p50 = %v, want 3", got)
	}
	if got := pct([]time.Duration{5, 1, 3, 2, 4}, 99); got != 5 {
		t.Errorf("p99 = %v, want 5", got)
	}
}

// Every design runs first in turn, and the table is the same whichever
// design ran first: ratios stay over Sluice's column.
func TestDesignsTakeTurnsRunningFirst(t *testing.T) {
	firsts := map[string]int{}
	for k := range 2 * len(designs) {
		r := rotated(designs, k)
		if len(r) != len(designs) {
			t.Fatalf("rotated(%d) has %d designs, want %d", k, len(r), len(designs))
		}
		seen := map[string]bool{}
		for _, d := range r {
			seen[d.name] = true
		}
		if len(seen) != len(designs) {
			t.Fatalf("rotated(%d) repeats or drops a design: %v", k, seen)
		}
		firsts[r[0].name]++
	}
	for _, d := range designs {
		if firsts[d.name] != 2 {
			t.Errorf("%s ran first %d times in %d workloads, want 2", d.name, firsts[d.name], 2*len(designs))
		}
	}
	a, b := newTable([]string{"sluice", "serial"}), newTable([]string{"sluice", "serial"})
	a.add("sluice", []figure{{row: "x", value: 10}})
	a.add("serial", []figure{{row: "x", value: 25}})
	b.add("serial", []figure{{row: "x", value: 25}})
	b.add("sluice", []figure{{row: "x", value: 10}})
	if a.String() != b.String() {
		t.Errorf("the table depends on the run order:\n%s\n%s", a.String(), b.String())
	}
}
