package core

import "testing"

// ModelStatus.WantLoaded is the desired state the last successful manager
// left, which the persistent registry restores (CONTRACT.md
// persist.restore): loaded after a register or load, unloaded after an
// unload or a bulk member, unchanged by evictions and by failed managers.
func TestWantLoadedFollowsSuccessfulManagers(t *testing.T) {
	h := newHarness(t, Options{MaxLoadedModels: 1})
	want := func(id string, w bool) {
		t.Helper()
		if st := h.state(id); st.WantLoaded != w {
			t.Fatalf("%s: WantLoaded %v, want %v (%+v)", id, st.WantLoaded, w, st)
		}
	}
	h.register("a", cfg(1), 1)
	want("a", true)
	h.manager("a", OpUnload)
	h.completeAll(1)
	want("a", false)
	h.manager("a", OpLoad)
	h.completeAll(1)
	want("a", true)

	// Loading b evicts a (one resident model at most): a is unloaded, but
	// nobody asked for that, so its desired state stays loaded.
	h.register("b", cfg(1), 1)
	if st := h.state("a"); st.Loaded {
		t.Fatalf("a was not evicted: %+v", st)
	}
	want("a", true)
	want("b", true)

	h.bulkUnload("a", "b")
	h.completeAll(1)
	want("a", false)
	want("b", false)

	// A load that fails leaves the desired state as it was.
	h.manager("b", OpLoad)
	h.step("b", EfStartLoad, 0, true)
	want("b", false)
}
