package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

var bg = context.Background()

// A registered model serves from the slot and version the core granted, and
// the fixture's output names the same model, version, slot and session.
func TestApplyThenInfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		st := e.apply("a", spec(2, `{"load_ms":10,"clone_ms":5,"capacity":4}`))
		if !st.Loaded || st.State != core.Ready || st.ConfigVersion != 1 || st.Slots != 2 || st.MaxParallelSlots != 4 {
			t.Fatalf("status after apply: %+v", st)
		}
		a, b := e.infer(bg, "a", `{"gate":"g"}`, InferOptions{}), e.infer(bg, "a", `{"gate":"g"}`, InferOptions{})
		synctest.Wait()
		if st := e.status("a"); st.ActiveSlots != 2 {
			t.Fatalf("two requests should hold both slots: %+v", st)
		}
		e.fx.Gates().Open("g")
		slots := map[int]bool{}
		for _, c := range []*call[Result]{a, b} {
			res, err := c.wait()
			if err != nil {
				t.Fatal(err)
			}
			out := decodeOut(t, res.Output.JSON)
			if out.Model != "a" || out.ConfigVersion != res.Version || res.Version != 1 || out.Slot != res.Slot ||
				!strings.HasPrefix(out.Session, "a/v1/") {
				t.Fatalf("result %+v, output %+v", res, out)
			}
			slots[res.Slot] = true
		}
		if !slots[0] || !slots[1] {
			t.Fatalf("slots used: %v", slots)
		}
		if st := e.status("a"); st.ActiveSlots != 0 {
			t.Fatalf("%+v", st)
		}
	})
}

func TestUnknownModel(t *testing.T) {
	e := newEnv(t, core.Options{})
	if _, err := e.rt.Infer(bg, "nope", backends.Request{}, InferOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("infer: %v", err)
	}
	if _, err := e.rt.Load(bg, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load: %v", err)
	}
	if _, err := e.rt.Unload(bg, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unload: %v", err)
	}
	if _, err := e.rt.StatusOf("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("status: %v", err)
	}
}

// Invalid specs are refused before anything live changes (CONTRACT.md,
// "Invalid task/preset/spec/schema before live changes").
func TestApplyInvalid(t *testing.T) {
	e := newEnv(t, core.Options{})
	for name, s := range map[string]ModelSpec{
		"slots":          spec(17, `{}`),
		"unknown option": spec(1, `{"bogus":1}`),
		"not an object":  spec(1, `[1]`),
		"trailing data":  spec(1, `{} {}`),
		"bad capacity":   spec(1, `{"capacity":0}`),
		"unknown engine": {Engine: "nope", Slots: 1},
		"negative queue": {Engine: "fixture", Slots: 1, MaxQueue: -1},
	} {
		if _, err := e.rt.Apply(bg, "a", s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(e.rt.Status()) != 0 {
		t.Fatalf("an invalid spec registered a model: %+v", e.rt.Status())
	}
	e.apply("a", spec(2, `{}`))
	if _, err := e.rt.Apply(bg, "a", spec(1, `{"bogus":1}`)); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if st := e.status("a"); st.ConfigVersion != 1 || !st.Loaded || st.Slots != 2 {
		t.Fatalf("invalid replacement changed the model: %+v", st)
	}
}

// slots=5 on capacity 4 is invalid_request and keeps the old pool, count,
// metadata and residency; a valid resize works afterwards (CONTRACT.md,
// "Unsupported capacity on existing registration").
func TestUnsupportedCapacityKeepsPool(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", spec(2, `{"capacity":4}`))
	res1, _ := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{})
	_, err := e.rt.Apply(bg, "a", spec(5, `{"capacity":4}`))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("slots=5 on capacity 4: %v", err)
	}
	st := e.status("a")
	if st.ConfigVersion != 1 || st.Slots != 2 || !st.Loaded || st.MaxParallelSlots != 4 {
		t.Fatalf("old state not kept: %+v", st)
	}
	res2, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{})
	if err != nil || decodeOut(t, res2.Output.JSON).Session != decodeOut(t, res1.Output.JSON).Session {
		t.Fatalf("pool replaced: %v %s %s", err, res1.Output.JSON, res2.Output.JSON)
	}
	st = e.apply("a", spec(4, `{"capacity":4}`))
	if st.ConfigVersion != 2 || st.Slots != 4 || !st.Loaded {
		t.Fatalf("valid resize: %+v", st)
	}
	// A changed session set is probed privately; a failed probe keeps the
	// old state whole.
	if _, err := e.rt.Apply(bg, "a", spec(3, `{"capacity":4,"fail_probe":true}`)); !errors.Is(err, ErrBackend) {
		t.Fatalf("failed probe: %v", err)
	}
	if st := e.status("a"); st.ConfigVersion != 2 || st.Slots != 4 || !st.Loaded {
		t.Fatalf("failed probe changed the model: %+v", st)
	}
}

// A reconfigure that changes only admission metadata keeps the pool; the
// requests it admits are bound to the new version (Request.Version).
func TestMetadataOnlyReconfigure(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", spec(1, `{}`))
	r1, _ := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{})
	s := spec(1, `{}`)
	second := time.Second
	s.AdmissionTimeout = &second
	if st := e.apply("a", s); st.ConfigVersion != 2 || !st.Loaded {
		t.Fatalf("%+v", st)
	}
	r2, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o1, o2 := decodeOut(t, r1.Output.JSON), decodeOut(t, r2.Output.JSON)
	if o1.Session != o2.Session || o2.ConfigVersion != 2 || r2.Version != 2 {
		t.Fatalf("want same session at version 2: %+v %+v", o1, o2)
	}
}

// Management blocks later requests even with spare slots, while earlier
// admitted work drains; requests behind a reconfigure bind the new version
// (CONTRACT.md order.request-then-manager and order.manager-then-request).
func TestManagerBarrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(2, `{}`))
		r1 := e.infer(bg, "a", `{"gate":"g"}`, InferOptions{})
		synctest.Wait()
		re := start(func() (core.ModelStatus, error) { return e.rt.Apply(bg, "a", spec(2, `{"infer_ms":1}`)) })
		synctest.Wait()
		r2 := e.infer(bg, "a", `{}`, InferOptions{})
		synctest.Wait()
		st := e.status("a")
		if st.ActiveSlots != 1 || st.QueuedManagers != 1 || st.QueuedRequests != 1 || r2.finished() {
			t.Fatalf("a later request passed the barrier: %+v", st)
		}
		e.fx.Gates().Open("g")
		res1, err1 := r1.wait()
		mst, errm := re.wait()
		res2, err2 := r2.wait()
		if err1 != nil || errm != nil || err2 != nil {
			t.Fatal(err1, errm, err2)
		}
		if res1.Version != 1 || mst.ConfigVersion != 2 || res2.Version != 2 {
			t.Fatalf("versions: first %d, manager %d, second %d", res1.Version, mst.ConfigVersion, res2.Version)
		}
	})
}

// Two cold requests share one load; a warm model keeps serving while
// another model loads (CONTRACT.md two.a-loading-b-ready.request-a, two.a-loading-b-ready.request-b).
func TestColdLoadShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{SerializeColdLoads: true})
		e.apply("a", spec(2, `{"load_ms":100}`))
		e.apply("b", spec(1, `{}`))
		if _, err := e.rt.Unload(bg, "a"); err != nil {
			t.Fatal(err)
		}
		_, stop := e.record()
		t0 := time.Now()
		r1, r2 := e.infer(bg, "a", `{}`, InferOptions{}), e.infer(bg, "a", `{}`, InferOptions{})
		synctest.Wait()
		if st := e.status("a"); st.State != core.Loading || st.ActiveSlots != 2 || st.Loaded {
			t.Fatalf("both cold requests should wait on one load: %+v", st)
		}
		if _, err := e.rt.Infer(bg, "b", backends.Request{}, InferOptions{}); err != nil || time.Since(t0) != 0 {
			t.Fatalf("warm b waited for a's load: %v after %v", err, time.Since(t0))
		}
		for _, c := range []*call[Result]{r1, r2} {
			if _, err := c.wait(); err != nil {
				t.Fatal(err)
			}
		}
		if time.Since(t0) != 100*time.Millisecond {
			t.Fatalf("cold requests took %v, want one load of 100ms", time.Since(t0))
		}
		loads := 0
		for _, r := range stop() {
			if r.Ef == "StartLoad" {
				loads++
			}
		}
		if loads != 1 {
			t.Fatalf("%d loads, want 1", loads)
		}
	})
}
