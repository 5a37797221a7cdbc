package runtime

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// A failed load backs off (CONTRACT.md fail.load-backoff): a request that
// would load again is refused server_busy with the remaining backoff as its
// RetryAfter, and the runtime's own timer ends the backoff (core forgets it
// on a Tick), with no idle timeout configured, so the next request loads.
func TestLoadBackoffEndsOnTheRuntimesTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{LoadBackoff: int64(time.Second), LoadBackoffMax: int64(4 * time.Second)})
		if _, err := e.rt.Apply(bg, "a", spec(1, `{"fail_load":true}`)); !errors.Is(err, ErrBackend) {
			t.Fatalf("register with a failing load: %v", err)
		}
		fakeTime(300 * time.Millisecond)
		_, err := e.infer(bg, "a", `{}`, InferOptions{}).wait()
		var re *Error
		if !errors.As(err, &re) || !errors.Is(err, ErrServerBusy) || re.RetryAfter != 700*time.Millisecond {
			t.Fatalf("request while backing off: %v (%#v)", err, re)
		}
		if st := e.status("a"); st.LoadFailures != 1 || st.BackoffUntil == 0 {
			t.Fatalf("status while backing off: %+v", st)
		}
		fakeTime(700 * time.Millisecond)
		synctest.Wait()
		if st := e.status("a"); st.BackoffUntil != 0 {
			t.Fatalf("the backoff outlived its end: %+v", st)
		}
		// The retry loads (and fails again): the backoff doubles.
		if _, err := e.infer(bg, "a", `{}`, InferOptions{}).wait(); !errors.Is(err, ErrBackend) {
			t.Fatalf("request after the backoff: %v", err)
		}
		_, err = e.infer(bg, "a", `{}`, InferOptions{}).wait()
		if !errors.As(err, &re) || re.RetryAfter != 2*time.Second {
			t.Fatalf("second backoff: %v", err)
		}
		// A reconfigure (a manager) ends it and loads at once.
		if st := e.apply("a", spec(1, `{}`)); !st.Loaded || st.LoadFailures != 0 || st.BackoffUntil != 0 {
			t.Fatalf("reconfigure: %+v", st)
		}
	})
}
