package core

import (
	"fmt"
	"testing"
)

// Matrix "Two-model situations": each operation against each start
// situation of models a and b. now is the outcome before anything drains,
// "*" where the cell does not pin it.
type twoSituation struct {
	name  string
	setup func(h *harness)
	// immediate outcomes of: request a, request b, reconfigure a, unload a, bulk a+b
	now [5]string
	// bFreedAtOnce: a bulk a+b frees b before a drains.
	bFreedAtOnce bool
}

func readyAB(h *harness) {
	h.register("a", cfg(2), capacity)
	h.register("b", cfg(2), capacity)
}

func unloadA(h *harness) {
	h.manager("a", OpUnload)
	h.drain(capacity)
}

var twoSituations = []twoSituation{
	{"a-unloaded-b-ready", func(h *harness) { readyAB(h); unloadA(h) },
		[5]string{"pending", "granted", "pending", "done", "*"}, true},
	{"a-loading-b-ready", func(h *harness) { readyAB(h); unloadA(h); h.request("a") },
		[5]string{"pending", "granted", "pending", "pending", "pending"}, true},
	{"a-running-spare-b-ready", func(h *harness) { readyAB(h); h.request("a") },
		[5]string{"granted", "granted", "pending", "pending", "pending"}, true},
	{"a-full-queued-b-ready", func(h *harness) { readyAB(h); h.request("a"); h.request("a"); h.request("a") },
		[5]string{"pending", "granted", "pending", "pending", "pending"}, true},
	{"a-reconfiguring-b-running", func(h *harness) { readyAB(h); h.apply("a", changed(2, `{"r":1}`)); h.request("b") },
		[5]string{"pending", "granted", "pending", "pending", "pending"}, false},
	{"a-unloading-b-ready", func(h *harness) { readyAB(h); h.manager("a", OpUnload) },
		[5]string{"pending", "granted", "pending", "pending", "pending"}, true},
	{"a-b-loading", func(h *harness) {
		readyAB(h)
		h.bulkUnload("a", "b")
		h.drain(capacity)
		h.request("a")
		h.request("b")
	},
		[5]string{"pending", "pending", "pending", "pending", "pending"}, false},
	{"bulk-targets-a-b", func(h *harness) { readyAB(h); h.request("a"); h.request("b"); h.bulkUnload("b", "a") },
		[5]string{"pending", "pending", "pending", "pending", "pending"}, false},
}

var twoOps = []string{"request-a", "request-b", "reconfigure-a", "unload-a", "unload-a-b"}

func TestMatrixTwoModels(t *testing.T) {
	for _, s := range twoSituations {
		for k, op := range twoOps {
			t.Run(s.name+"/"+op, func(t *testing.T) {
				h := newHarness(t, Options{})
				s.setup(h)
				var tk Ticket
				switch op {
				case "request-a":
					tk = h.request("a")
				case "request-b":
					tk = h.request("b")
				case "reconfigure-a":
					tk = h.apply("a", changed(3, `{"n":2}`))
				case "unload-a":
					tk = h.manager("a", OpUnload)
				case "unload-a-b":
					tk = h.bulkUnload("a", "b")
					if s.bFreedAtOnce && h.state("b").Loaded {
						t.Fatalf("ready-idle b not freed before waiting on a: %+v", h.state("b"))
					}
				}
				if w := s.now[k]; w != "*" {
					h.expect(tk, w)
				}
				h.drain(capacity)
				a, b := h.state("a"), h.state("b")
				switch op {
				case "request-a", "request-b":
					h.expect(tk, "granted")
					x := a
					if op == "request-b" {
						x = b
					}
					if x.State != Ready {
						t.Fatalf("after request: %+v", x)
					}
				case "reconfigure-a":
					h.expect(tk, "done")
					if a.State != Ready || a.Slots != 3 {
						t.Fatalf("after reconfigure: %+v", a)
					}
				case "unload-a":
					h.expect(tk, "done")
					if a.State != Unloaded {
						t.Fatalf("after unload: %+v", a)
					}
				case "unload-a-b":
					h.expect(tk, "done")
					if a.State != Unloaded || b.State != Unloaded || fmt.Sprint(h.bulk[tk].Unloaded) != "[a b]" {
						t.Fatalf("after bulk: %+v %+v %+v", a, b, h.bulk[tk])
					}
				}
			})
		}
	}
}

// Warm b progresses while a is stuck in its cold load or slow teardown: no
// registry-wide wait (cells two.a-loading-b-ready.request-b and
// two.a-unloading-b-ready.request-b), also under the global cold-load guard.
func TestTwoModelsWarmBypassesColdA(t *testing.T) {
	h := newHarness(t, Options{SerializeColdLoads: true})
	readyAB(h)
	h.register("c", cfg(1), capacity)
	h.manager("c", OpUnload)
	unloadA(h)
	h.drain(capacity)
	ra := h.request("a")
	rc := h.request("c") // guarded: waits for a's load to finish
	if _, ok := h.pending("c", EfStartLoad); ok {
		t.Fatal("cold-load guard let two loads run")
	}
	rb := h.request("b")
	h.expect(rb, "granted")
	h.release(rb)
	h.drain(capacity)
	h.expect(ra, "granted")
	h.expect(rc, "granted")
}
