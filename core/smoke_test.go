package core

import "testing"

func TestSmoke(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(2), 4)
	r1 := h.request("a")
	r2 := h.request("a")
	r3 := h.request("a")
	h.expect(r1, "granted v1")
	h.expect(r2, "granted v1")
	h.expect(r3, "pending")
	u := h.manager("a", OpUnload)
	r4 := h.request("a")
	h.release(r1)
	h.expect(r3, "granted")
	h.release(r2)
	h.release(r3)
	h.expect(u, "pending")
	if s := h.state("a"); s.Loaded || s.State != Unloading {
		t.Fatalf("%+v", s)
	}
	h.step("a", EfStartTeardown, 0, false)
	h.expect(u, "done")
	h.expect(r4, "pending")
	h.completeAll(4)
	h.expect(r4, "granted")
	h.release(r4)
	t.Log(h.log)
}
