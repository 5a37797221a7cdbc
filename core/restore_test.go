package core

import "testing"

// A registration with a base version starts the model's config versions
// there, and every later reconfigure counts on from it; RegisterOnly
// leaves it unloaded. The registration fields are never part of the
// committed config, so an identical reconfigure stays a no-op
// (CONTRACT.md persist.version-continues).
func TestRegisterAtBaseVersion(t *testing.T) {
	h := newHarness(t, Options{})
	c := cfg(1)
	c.BaseVersion, c.RegisterOnly = 7, true
	tk := h.apply("a", c)
	h.expect(tk, "done")
	st := h.state("a")
	if st.ConfigVersion != 7 || st.State != Unloaded || st.Loaded {
		t.Fatalf("restored unloaded: %+v", st)
	}
	if got := h.m.Config(h.handle("a")); got.BaseVersion != 0 || got.RegisterOnly {
		t.Fatalf("registration fields committed: %+v", got)
	}
	tk = h.manager("a", OpLoad)
	h.completeAll(1)
	h.expect(tk, "done")
	if e, ok := h.res[h.request("a")]; !ok || e.Version != 7 {
		t.Fatalf("grant not bound to v7: %v", h.log)
	}
	h.drain(1)
	tk = h.apply("a", cfg(1)) // identical: no new version
	h.completeAll(1)
	h.expect(tk, "done")
	if v := h.state("a").ConfigVersion; v != 7 {
		t.Fatalf("identical apply moved the version to %d", v)
	}
	c2 := cfg(1)
	c2.MaxQueue, c2.BaseVersion, c2.RegisterOnly = 3, 99, true // ignored on a reconfigure
	tk = h.apply("a", c2)
	h.completeAll(1)
	h.expect(tk, "done")
	if st := h.state("a"); st.ConfigVersion != 8 || !st.Loaded {
		t.Fatalf("reconfigure after restore: %+v", st)
	}

	c3 := cfg(1)
	c3.BaseVersion = 4 // loaded at start: a load at its base version
	tk = h.apply("b", c3)
	if e, ok := h.pending("b", EfStartLoad); !ok || e.Version != 4 {
		t.Fatalf("load of restored b: %v", h.log)
	}
	h.completeAll(1)
	h.expect(tk, "done")

	bad := cfg(1)
	bad.BaseVersion = MaxBaseVersion + 1
	h.expect(h.apply("c", bad), "reject invalid_request")
}
