package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// The admission counters see every request outcome and every refused
// targeted manager, with the wait from submission to grant, in fake time.
func TestAdmissionStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{}, func(c *envConfig) {
			c.WaitBuckets = []time.Duration{time.Millisecond, time.Second, 10 * time.Second}
		})
		e.apply("a", spec(1, `{}`))
		l1, err := e.rt.Acquire(bg, "a", nil) // granted at submission: waits 0
		if err != nil {
			t.Fatal(err)
		}
		queued := start(func() (*Lease, error) { return e.rt.Acquire(bg, "a", nil) })
		synctest.Wait()
		fakeTime(2 * time.Second)
		l1.Release(false)
		l2, err := queued.wait() // waited 2 s
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.rt.Acquire(bg, "a", dur(time.Second)); !errors.Is(err, ErrServerBusy) { // times out
			t.Fatalf("timeout: %v", err)
		}
		ctx, cancel := context.WithCancel(bg)
		gone := start(func() (*Lease, error) { return e.rt.Acquire(ctx, "a", nil) })
		synctest.Wait()
		cancel() // leaves the queue
		if _, err := gone.wait(); !errors.Is(err, ErrCancelled) {
			t.Fatalf("disconnect: %v", err)
		}
		l2.Release(false)
		if _, err := e.rt.Acquire(bg, "nope", nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown: %v", err)
		}
		if _, err := e.rt.Load(bg, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown manager: %v", err)
		}
		if _, err := e.rt.Apply(bg, "a", spec(99, `{}`)); !errors.Is(err, ErrInvalid) { // refused before the core: not counted
			t.Fatalf("invalid apply: %v", err)
		}

		st := e.rt.AdmissionStats()
		if len(st) != 2 || st[0].Model != "a" || st[1].Model != "" {
			t.Fatalf("stats of %d entries: %+v", len(st), st)
		}
		a, unknown := st[0], st[1]
		if a.Admissions != 2 || a.WaitSum != 2*time.Second {
			t.Fatalf("admissions %d, wait %v; want 2 and 2s", a.Admissions, a.WaitSum)
		}
		if want := []uint64{1, 1, 2}; !slices.Equal(a.WaitBuckets, want) {
			t.Fatalf("wait buckets %v, want %v (cumulative)", a.WaitBuckets, want)
		}
		if a.Refusals[core.CodeServerBusy] != 1 || a.Refusals[core.CodeCancelled] != 1 || a.Refusals[core.CodeInvalid] != 0 {
			t.Fatalf("refusals of a: %v", a.Refusals)
		}
		if unknown.Refusals[core.CodeNotFound] != 2 || unknown.Admissions != 0 {
			t.Fatalf("unknown IDs: %+v", unknown)
		}
	})
}

// A lifecycle observer sees the steps with backend work and nothing of
// warm requests; a status observer starts from a snapshot and, keeping the
// statuses its steps carry, ends with exactly the runtime's statuses
// without replaying anything.
func TestFilteredAndStatusObservers(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", spec(2, `{}`))
	life, stopLife := e.rt.Observe(ObserveOptions{Buffer: 1 << 10, Lifecycle: true})
	all, stopAll := e.rt.Observe(ObserveOptions{Buffer: 1 << 10, Status: true})
	for range 5 {
		if _, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.rt.Unload(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Load(bg, "a"); err != nil {
		t.Fatal(err)
	}
	stopLife()
	stopAll()
	var kinds []string
	for st := range life {
		kinds = append(kinds, lifecycleNames(&st)...)
	}
	want := []string{"Retire", "StartTeardown", "TeardownDone", "StartLoad", "LoadDone", "StartClone", "CloneDone", "Publish"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("lifecycle steps %v, want %v", kinds, want)
	}
	first := true
	seen := map[string]core.ModelStatus{}
	n := 0
	for st := range all {
		if first != (st.Event.Kind == core.EvNone) {
			t.Fatalf("step %d is %s", n, st.Event.Kind)
		}
		first = false
		for _, ms := range st.Status {
			seen[ms.ID] = ms
		}
		n++
	}
	if got := e.rt.Status(); n < 10 || len(got) != 1 || seen["a"] != got[0] {
		t.Fatalf("after %d steps the observer holds %+v, the runtime %+v", n, seen, got)
	}
}

// lifecycleNames lists a step's backend event and effects.
func lifecycleNames(st *Step) []string {
	var out []string
	switch st.Event.Kind {
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		out = append(out, st.Event.Kind.String())
	}
	for _, e := range st.Effects {
		switch e.Kind {
		case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown, core.EfPublish, core.EfRetire:
			out = append(out, e.Kind.String())
		}
	}
	return out
}

// Reobserve moves one subscription from the lifecycle to every step with
// statuses and back without losing or doubling a step: the old channel
// ends where the new one begins, with a snapshot when it asks for
// statuses; a cancelled subscription cannot be changed.
func TestReobserve(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", spec(2, `{}`))
	life, stop := e.rt.Observe(ObserveOptions{Buffer: 1 << 10, Lifecycle: true})
	if _, err := e.rt.Unload(bg, "a"); err != nil {
		t.Fatal(err)
	}
	full, ok := e.rt.Reobserve(life, ObserveOptions{Buffer: 1 << 10, Status: true})
	if !ok {
		t.Fatal("a live subscription could not be changed")
	}
	var kinds []string
	for st := range life { // closed by the change
		kinds = append(kinds, lifecycleNames(&st)...)
	}
	if want := []string{"Retire", "StartTeardown", "TeardownDone"}; !slices.Equal(kinds, want) {
		t.Fatalf("before the change: %v, want %v", kinds, want)
	}
	if _, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}); err != nil { // loads, then a warm request's steps
		t.Fatal(err)
	}
	back, ok := e.rt.Reobserve(full, ObserveOptions{Buffer: 1 << 10, Lifecycle: true})
	if !ok {
		t.Fatal("the full subscription could not be changed back")
	}
	first, n, seen := true, 0, map[string]core.ModelStatus{}
	kinds = kinds[:0]
	for st := range full {
		if first != (st.Event.Kind == core.EvNone) {
			t.Fatalf("step %d is %s", n, st.Event.Kind)
		}
		first = false
		for _, ms := range st.Status {
			seen[ms.ID] = ms
		}
		kinds = append(kinds, lifecycleNames(&st)...)
		n++
	}
	if want := []string{"StartLoad", "LoadDone", "StartClone", "CloneDone", "Publish"}; !slices.Equal(kinds, want) {
		t.Fatalf("while full: %v, want %v", kinds, want)
	}
	if got := e.rt.Status(); n < 5 || seen["a"] != got[0] {
		t.Fatalf("after %d steps the observer holds %+v, the runtime %+v", n, seen, got)
	}
	if _, err := e.rt.Unload(bg, "a"); err != nil {
		t.Fatal(err)
	}
	stop()
	kinds = kinds[:0]
	for st := range back {
		if len(st.Status) != 0 {
			t.Fatal("a lifecycle step carries statuses")
		}
		kinds = append(kinds, lifecycleNames(&st)...)
	}
	if want := []string{"Retire", "StartTeardown", "TeardownDone"}; !slices.Equal(kinds, want) {
		t.Fatalf("after the change back: %v, want %v", kinds, want)
	}
	if _, ok := e.rt.Reobserve(back, ObserveOptions{Buffer: 1, Lifecycle: true}); ok {
		t.Fatal("a cancelled subscription was changed")
	}
}
