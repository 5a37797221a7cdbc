package runtime

import (
	"testing"
	"testing/synctest"

	"github.com/sluice-dev/sluice/core"
)

// WatchManagers fires for a targeted manager and a bulk unload naming the
// model, not for another model's, and a stopped watch never fires
// (CONTRACT.md live.drain-unload).
func TestWatchManagers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{}`))
		e.apply("b", spec(1, `{}`))
		lease, err := e.rt.Acquire(bg, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		fired, stop := e.rt.WatchManagers("a")
		defer stop()
		stopped, stop2 := e.rt.WatchManagers("a")
		stop2()
		stop2()
		if _, err := e.rt.Unload(bg, "b"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-fired:
			t.Fatal("another model's manager fired the watch")
		default:
		}
		unload := start(func() (core.ModelStatus, error) { return e.rt.Unload(bg, "a") })
		<-fired
		if st := e.status("a"); st.QueuedManagers != 1 {
			t.Errorf("queued managers %d, want 1", st.QueuedManagers)
		}
		select {
		case <-stopped:
			t.Fatal("a stopped watch fired")
		default:
		}
		lease.Release(false)
		if _, err := unload.wait(); err != nil {
			t.Fatal(err)
		}
		bulk, stop3 := e.rt.WatchManagers("a")
		defer stop3()
		if _, err := e.rt.BulkUnload(bg, []string{"a"}); err != nil {
			t.Fatal(err)
		}
		<-bulk
	})
}
