package runtime

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// Unregister is a barrier like Unload: the running request finishes, the
// request and the Apply that arrived behind it get ErrNotFound, the model
// leaves Status, and a later Apply registers it past its last version
// (CONTRACT.md unreg.barrier, unreg.404-after, unreg.re-register).
func TestUnregisterBarrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{}`))
		e.apply("a", spec(1, `{"capacity":4}`)) // v2
		e.apply("b", spec(1, `{}`))
		running := e.infer(bg, "a", `{"gate":"g"}`, InferOptions{})
		synctest.Wait()
		del := start(func() (core.ModelStatus, error) { return e.rt.Unregister(bg, "a") })
		synctest.Wait()
		behind := e.infer(bg, "a", `{}`, InferOptions{})
		synctest.Wait()
		apply := start(func() (core.ModelStatus, error) { return e.rt.Apply(bg, "a", spec(1, `{}`)) })
		synctest.Wait()
		if st := e.status("a"); st.ActiveSlots != 1 || st.QueuedManagers != 2 || st.QueuedRequests != 1 || del.finished() {
			t.Fatalf("behind the running request: %+v", st)
		}
		e.fx.Gates().Open("g")
		if _, err := running.wait(); err != nil {
			t.Fatalf("the running request: %v", err)
		}
		if st, err := del.wait(); err != nil || st.ConfigVersion != 2 || st.Loaded {
			t.Fatalf("unregister: %+v %v", st, err)
		}
		if _, err := behind.wait(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("request behind the unregister: %v", err)
		}
		if _, err := apply.wait(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("apply behind the unregister: %v", err)
		}
		if _, err := e.rt.StatusOf("a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("status after: %v", err)
		}
		if all := e.rt.Status(); len(all) != 1 || all[0].ID != "b" {
			t.Fatalf("Status lists %+v", all)
		}
		if !e.rt.Unregistered("a") || e.rt.Unregistered("b") || e.rt.Entries() != 2 {
			t.Fatalf("tombstone: unregistered=%v entries=%d", e.rt.Unregistered("a"), e.rt.Entries())
		}
		if _, err := e.rt.Unregister(bg, "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a second unregister: %v", err)
		}
		if st := e.apply("a", spec(2, `{}`)); st.ConfigVersion != 3 || !st.Loaded {
			t.Fatalf("re-registered: %+v", st)
		}
		if _, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// A tombstone restored from the persistent registry is unregistered at its
// version: a later Apply starts past it (CONTRACT.md unreg.persisted).
func TestRestoreUnregistered(t *testing.T) {
	e := newEnv(t, core.Options{})
	if err := e.rt.RestoreUnregistered(bg, "a", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.StatusOf("a"); !errors.Is(err, ErrNotFound) || !e.rt.Unregistered("a") {
		t.Fatalf("restored tombstone: %v", err)
	}
	if st := e.apply("a", spec(1, `{}`)); st.ConfigVersion != 8 {
		t.Fatalf("registered after the tombstone at v%d, want 8", st.ConfigVersion)
	}
	if err := e.rt.RestoreUnregistered(bg, "a", 9); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a tombstone over a registered model: %v", err)
	}
}
