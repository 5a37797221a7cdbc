package runtime

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

// A refused manager tells whether it committed a config version
// (Error.Committed, from core.Effect.Committed), so the persistent
// registry records exactly what committed (CONTRACT.md
// persist.committed-only) without comparing versions around the call.
func TestRefusalTellsWhetherItCommitted(t *testing.T) {
	e := newEnv(t, core.Options{})
	bg := context.Background()
	for _, tc := range []struct {
		name      string
		id        string
		spec      ModelSpec
		committed bool
	}{
		{"registration whose first load fails", "f", spec(1, `{"fail_load":true}`), true},
		{"invalid spec", "z", spec(0, `{}`), false},
		{"reconfigure whose load fails after its commit", "a", spec(1, `{"fail_load":true}`), true},
		{"reconfigure whose probe fails before its commit", "a", spec(2, `{"fail_probe":true}`), false},
	} {
		if tc.id == "a" {
			if _, err := e.rt.StatusOf("a"); err != nil {
				e.apply("a", spec(1, `{}`))
			}
		}
		_, err := e.rt.Apply(bg, tc.id, tc.spec)
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if got := Committed(err); got != tc.committed {
			t.Errorf("%s: Committed %v, want %v (%v)", tc.name, got, tc.committed, err)
		}
	}
	if _, err := e.rt.Load(bg, "nope"); Committed(err) {
		t.Errorf("a load of an unknown ID committed: %v", err)
	}
}

// AcquireTask refuses a model of another task before the request queues,
// and again on the lease's own snapshot: a request admitted behind a
// reconfigure that changed the task (the pre-check saw the old task) is
// refused with the pool's task and holds nothing (CONTRACT.md
// err.wrong-task).
func TestAcquireTaskChecksTheLeasesSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{}`))
		var te *TaskError
		if _, err := e.rt.AcquireTask(bg, "a", "asr", nil); !errors.As(err, &te) || te.Have != "tts" || te.Want != "asr" {
			t.Fatalf("wrong task: %v", err)
		}
		if st := e.status("a"); st.QueuedRequests != 0 || st.ActiveSlots != 0 {
			t.Fatalf("a wrong-task request queued or held a slot: %+v", st)
		}
		r1 := e.infer(bg, "a", `{"gate":"g"}`, InferOptions{})
		synctest.Wait()
		asr := spec(1, `{}`)
		asr.Task = "asr"
		re := start(func() (core.ModelStatus, error) { return e.rt.Apply(bg, "a", asr) })
		synctest.Wait()
		late := start(func() (*Lease, error) { return e.rt.AcquireTask(bg, "a", "tts", nil) }) // the task is still tts
		synctest.Wait()
		if st := e.status("a"); st.QueuedManagers != 1 || st.QueuedRequests != 1 {
			t.Fatalf("not queued behind the reconfigure: %+v", st)
		}
		e.fx.Gates().Open("g")
		if _, err := r1.wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := re.wait(); err != nil {
			t.Fatal(err)
		}
		if l, err := late.wait(); !errors.As(err, &te) || te.Have != "asr" || l != nil {
			t.Fatalf("a lease of the wrong task: %v %v", l, err)
		}
		synctest.Wait()
		if st := e.status("a"); st.ActiveSlots != 0 {
			t.Fatalf("the refused lease still holds a slot: %+v", st)
		}
		l, err := e.rt.AcquireTask(bg, "a", "asr", nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Release(false)
	})
}

// A lease names the engine of its own snapshot, the config its pool was
// built from: a request admitted behind a reconfigure that changed the
// engine sees the new engine, though the status read before it queued
// named the old one (a live session decides its eligibility on it,
// CONTRACT.md live.handshake).
func TestLeaseEngineIsTheLeasesSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{}, withEngine("other", fixture.New()))
		e.apply("a", spec(1, `{}`))
		r1 := e.infer(bg, "a", `{"gate":"g"}`, InferOptions{})
		synctest.Wait()
		other := spec(1, `{}`)
		other.Engine = "other"
		re := start(func() (core.ModelStatus, error) { return e.rt.Apply(bg, "a", other) })
		synctest.Wait()
		before := e.status("a").Engine
		late := start(func() (*Lease, error) { return e.rt.AcquireTask(bg, "a", "tts", nil) })
		synctest.Wait()
		e.fx.Gates().Open("g")
		if _, err := r1.wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := re.wait(); err != nil {
			t.Fatal(err)
		}
		l, err := late.wait()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(false)
		if before != fixture.Name || l.Engine() != "other" {
			t.Fatalf("status before the reconfigure named %q, the lease behind it %q; want %q, %q", before, l.Engine(), fixture.Name, "other")
		}
	})
}
