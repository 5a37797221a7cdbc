package core

import (
	"fmt"
	"strings"
	"testing"
)

// Matrix "Arrival order and operation interactions".

func TestOrderRequestThenRequest(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	unloadA(h)
	r1, r2, r3 := h.request("a"), h.request("a"), h.request("a")
	// One shared initializer; both admitted requests wait on it.
	loads := 0
	for _, e := range h.jobs {
		if e.Kind == EfStartLoad {
			loads++
		}
	}
	if loads != 1 || h.state("a").ActiveSlots != 2 || h.state("a").QueuedRequests != 1 {
		t.Fatalf("loads=%d %+v", loads, h.state("a"))
	}
	h.completeAll(capacity)
	h.expect(r1, "granted")
	h.expect(r2, "granted")
	h.expect(r3, "pending")
	if h.res[r1].Slot == h.res[r2].Slot {
		t.Fatal("two requests share a session")
	}
	h.release(r2)
	h.expect(r3, "granted")
}

func TestOrderRequestThenManager(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(3), capacity)
	r1 := h.request("a")
	u := h.manager("a", OpUnload)
	r2 := h.request("a") // spare slots exist, but the barrier is older
	h.expect(r2, "pending")
	h.expect(u, "pending")
	h.release(r1)
	h.expect(u, "pending") // teardown running
	h.drain(capacity)
	h.expect(u, "done")
	h.expect(r2, "granted")
}

func TestOrderManagerThenRequest(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	r0 := h.request("a")
	h.apply("a", changed(2, `{"k":1}`))
	r := h.request("a")
	rt := h.requestT("a", 5000)
	h.m.Tick(h.now + 5000)
	h.collect()
	h.expect(rt, "reject server_busy") // timed out behind the barrier, holding nothing
	h.release(r0)
	h.drain(capacity)
	h.expect(r, "granted v2") // bound to the resulting config
}

func TestOrderManagerThenManager(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), capacity)
	r0 := h.request("a")
	ap := h.apply("a", changed(2, `{"k":1}`))
	un := h.manager("a", OpUnload)
	ld := h.manager("a", OpLoad)
	h.release(r0)
	h.drain(capacity)
	for _, tk := range []Ticket{ap, un, ld} {
		h.expect(tk, "done")
	}
	// Enqueue order: the unload retired the replacement, the load reloaded it.
	if st := h.state("a"); st.State != Ready || st.ConfigVersion != 2 {
		t.Fatalf("%+v", st)
	}
	seq := []string{}
	for _, l := range h.log {
		if len(l) > 4 && (l[:4] == "Done" || l[:5] == "Start") {
			seq = append(seq, l)
		}
	}
	want := "StartProbe a slots=2 StartTeardown a sessions=2 cause=reconfigure StartLoad a v2 StartClone a #1 Done a StartTeardown a sessions=2 cause=unload Done a StartLoad a v2 StartClone a #1 Done a"
	got := strings.Join(seq, " ")
	if !strings.HasSuffix(got, want) {
		t.Fatalf("order\n got %s\nwant suffix %s", got, want)
	}
}

func TestOrderDifferentModels(t *testing.T) {
	h := newHarness(t, Options{})
	readyAB(h)
	h.request("a")
	h.apply("a", changed(2, `{"k":1}`)) // a blocked behind a barrier and a probe
	for i := 0; i < 2; i++ {
		h.expect(h.request("b"), "granted")
	}
}

// Overlapping bulks in either order: shared models see the first bulk's
// barrier first; neither waits for the other; both finish.
func TestOrderOverlappingBulks(t *testing.T) {
	for _, rev := range []bool{false, true} {
		t.Run(fmt.Sprint("reversed=", rev), func(t *testing.T) {
			h := newHarness(t, Options{})
			readyAB(h)
			ra, rb := h.request("a"), h.request("b")
			b1 := h.bulkUnload("a", "b")
			sel := []string{"a", "b"}
			if rev {
				sel = []string{"b", "a"}
			}
			b2 := h.bulkUnload(sel...)
			for _, id := range []string{"a", "b"} {
				v := h.m.Inspect(h.handle(id))
				if len(v.Queue) != 2 || v.Queue[0].Seq > v.Queue[1].Seq {
					t.Fatalf("%s queue %+v", id, v.Queue)
				}
			}
			h.release(rb)
			h.release(ra)
			h.drain(capacity)
			h.expect(b1, "done")
			h.expect(b2, "done")
		})
	}
}

// Bulk then single operation, and the snapshot race: a model registered
// after the bulk's snapshot is not in its selection.
func TestOrderBulkThenSingleAndSnapshot(t *testing.T) {
	h := newHarness(t, Options{})
	readyAB(h)
	ra := h.request("a")
	b := h.bulkUnload("a", "b", "late")
	h.apply("late", cfg(1)) // registered after the snapshot
	r := h.request("a")     // queues behind a's barrier
	h.expect(r, "pending")
	h.release(ra)
	h.drain(capacity)
	h.expect(b, "done")
	if fmt.Sprint(h.bulk[b].NotFound) != "[late]" {
		t.Fatalf("%+v", h.bulk[b])
	}
	if st := h.state("late"); st.State != Ready {
		t.Fatalf("late model touched by the bulk: %+v", st)
	}
	h.expect(r, "granted")
}

// Bulk cancellation unwinds queued barriers; a member already unloading
// finishes and is not rolled back.
func TestOrderBulkCancel(t *testing.T) {
	h := newHarness(t, Options{})
	readyAB(h)
	ra := h.request("a")
	b := h.bulkUnload("a", "b") // b frees at once, a waits for ra
	if !h.cancel(b, ReasonDisconnect) {
		t.Fatal("cancel refused")
	}
	if v := h.m.Inspect(h.handle("a")); len(v.Queue) != 0 {
		t.Fatalf("a's barrier not withdrawn: %+v", v.Queue)
	}
	h.expect(b, "pending") // waits for b's running teardown
	h.drain(capacity)
	h.expect(b, "reject cancelled")
	h.expect(ra, "granted")
	if a, bb := h.state("a"), h.state("b"); a.State != Ready || bb.State != Unloaded {
		t.Fatalf("%+v %+v", a, bb)
	}
	// A bulk with nothing running ends at once when cancelled.
	r := h.request("a")
	b2 := h.bulkUnload("a")
	h.cancel(b2, ReasonDisconnect)
	h.expect(b2, "reject cancelled")
	h.release(r)
	if ok, _ := h.m.Cancel(h.tick(), r, ReasonDisconnect); ok {
		t.Fatal("cancel of a finished ticket")
	}
}
