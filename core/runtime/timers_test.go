package runtime

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// A queued waiter whose context is cancelled has left the queue once the
// test's cancel call returned and one scheduling step ran (synctest.Wait):
// the scheduler does not wait for a slot to free up (CONTRACT.md, "Client
// disconnect while queued" — Sluice cancels at once).
func TestQueuedCancelLeavesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{}`))
		hold := e.infer(bg, "a", `{"gate":"h"}`, InferOptions{})
		synctest.Wait()
		ctx, cancel := context.WithCancel(bg)
		q := e.infer(ctx, "a", `{}`, InferOptions{})
		behind := e.infer(bg, "a", `{}`, InferOptions{})
		synctest.Wait()
		if st := e.status("a"); st.QueuedRequests != 2 {
			t.Fatalf("want two queued: %+v", st)
		}
		cancel()
		synctest.Wait()
		if st := e.status("a"); st.QueuedRequests != 1 || st.ActiveSlots != 1 {
			t.Fatalf("cancelled waiter still queued: %+v", st)
		}
		if !q.finished() {
			t.Fatal("cancelled waiter has not returned")
		}
		if _, err := q.wait(); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		e.fx.Gates().Open("h")
		if _, err := hold.wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := behind.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter admitted and waiting for a cold load gives its slot back when its
// client goes away; the load nobody waits for any more is withdrawn if it
// has not started.
func TestInitialisingCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{"load_ms":50}`))
		if _, err := e.rt.Unload(bg, "a"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(bg)
		q := e.infer(ctx, "a", `{}`, InferOptions{})
		synctest.Wait()
		if st := e.status("a"); st.ActiveSlots != 1 || st.State != core.Loading {
			t.Fatalf("%+v", st)
		}
		cancel()
		synctest.Wait()
		if _, err := q.wait(); !errors.Is(err, ErrCancelled) {
			t.Fatal(err)
		}
		if st := e.status("a"); st.ActiveSlots != 0 {
			t.Fatalf("slot not given back: %+v", st)
		}
		fakeTime(time.Second) // the started load finishes and publishes
		synctest.Wait()
		if st := e.status("a"); !st.Loaded {
			t.Fatalf("%+v", st)
		}
	})
}

// The admission timeout (request override, model default, server default,
// ceiling) rejects a queued waiter with server_busy exactly at its deadline.
func TestAdmissionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{DefaultAdmissionTimeout: int64(300 * time.Millisecond), AdmissionCeiling: int64(time.Second)})
		for k, c := range []struct {
			model time.Duration // the model's admission timeout
			set   bool          // given explicitly (0: unbounded)
			o     *time.Duration
			want  time.Duration
		}{
			{200 * time.Millisecond, true, dur(100 * time.Millisecond), 100 * time.Millisecond}, // request override
			{200 * time.Millisecond, false, nil, 200 * time.Millisecond},                        // model default
			{0, false, nil, 300 * time.Millisecond},                                             // server default
			{0, true, nil, time.Second},                                                         // model unbounded, bounded by the ceiling
			{0, false, dur(0), time.Second},                                                     // request unbounded, bounded by the ceiling
			{0, false, dur(time.Hour), time.Second},                                             // ceiling
			{time.Hour, false, nil, time.Second},                                                // ceiling over the model's
		} {
			id := string(rune('a' + k))
			s := spec(1, `{}`)
			if c.set || c.model != 0 {
				s.AdmissionTimeout = dur(c.model)
			}
			e.apply(id, s)
			hold := e.infer(bg, id, `{"gate":"h"}`, InferOptions{})
			synctest.Wait()
			t0 := time.Now()
			_, err := e.rt.Infer(bg, id, backends.Request{}, InferOptions{Timeout: c.o})
			if !errors.Is(err, ErrServerBusy) || time.Since(t0) != c.want {
				t.Errorf("case %d: %v after %v, want server_busy after %v", k, err, time.Since(t0), c.want)
			}
			if st := e.status(id); st.QueuedRequests != 0 {
				t.Fatalf("%+v", st)
			}
			defer hold.wait()
		}
		e.fx.Gates().Open("h")
	})
}

// When every occupied slot has been held longer than a bounded waiter's
// timeout, it fails fast (CONTRACT.md time.overdue-blockers).
func TestOverdueBlockers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{}`))
		hold := e.infer(bg, "a", `{"infer_ms":10000}`, InferOptions{})
		fakeTime(2 * time.Second)
		t0 := time.Now()
		_, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{Timeout: dur(time.Second)})
		if !errors.Is(err, ErrServerBusy) || time.Since(t0) != 0 {
			t.Fatalf("overdue blocker: %v after %v", err, time.Since(t0))
		}
		if _, err := hold.wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// A ready model idle and queue-free for IdleTimeout retires on the timer,
// and its sessions are destroyed; the next request loads it again.
func TestIdleRetirement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{IdleTimeout: int64(5 * time.Second)})
		e.apply("a", spec(2, `{}`))
		e.apply("b", spec(1, `{}`))
		fakeTime(3 * time.Second)
		if _, err := e.rt.Infer(bg, "b", backends.Request{}, InferOptions{}); err != nil {
			t.Fatal(err)
		}
		fakeTime(2*time.Second + time.Millisecond)
		synctest.Wait()
		if a, b := e.status("a"), e.status("b"); a.Loaded || a.State != core.Unloaded || !b.Loaded {
			t.Fatalf("after 5s: a %+v b %+v", a, b)
		}
		if n := e.fx.OpenSessions(); n != 1 {
			t.Fatalf("%d sessions open, want b's one", n)
		}
		fakeTime(3 * time.Second)
		synctest.Wait()
		if b := e.status("b"); b.Loaded {
			t.Fatalf("b idle for 5s: %+v", b)
		}
		if _, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}); err != nil {
			t.Fatal(err)
		}
		if !e.status("a").Loaded {
			t.Fatal("a not reloaded")
		}
	})
}

// Loads evict the least recently used idle model under the residency limit;
// a busy model is never a victim, and with no victim the load is refused
// with server_busy (CONTRACT.md res.victim-choice, res.no-victim).
func TestEvictionAndRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{MaxLoadedModels: 2, MemoryBudgetMB: 1000})
		e.apply("a", spec(1, `{"memory_mb":400}`))
		fakeTime(time.Millisecond)
		e.apply("b", spec(1, `{"memory_mb":400}`))
		fakeTime(time.Millisecond)
		e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}) // b is now least recently used
		e.apply("c", spec(1, `{"memory_mb":400,"teardown_ms":10}`))
		if a, b, c := e.status("a"), e.status("b"), e.status("c"); !a.Loaded || b.Loaded || !c.Loaded {
			t.Fatalf("want b evicted: a %+v b %+v c %+v", a, b, c)
		}
		holdA := e.infer(bg, "a", `{"gate":"h"}`, InferOptions{})
		holdC := e.infer(bg, "c", `{"gate":"h"}`, InferOptions{})
		synctest.Wait()
		if _, err := e.rt.Infer(bg, "b", backends.Request{}, InferOptions{}); !errors.Is(err, ErrServerBusy) {
			t.Fatalf("load with only busy victims: %v", err)
		}
		if n, mb := e.rt.Residency(); n != 2 || mb != 800 {
			t.Fatalf("residency %d/%dMB", n, mb)
		}
		e.fx.Gates().Open("h")
		holdA.wait()
		holdC.wait()
	})
}

// Shutdown rejects queued waiters with shutting_down at once, lets admitted
// finite work finish, tears every pool down and refuses new work.
func TestShutdownDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{"infer_ms":100,"teardown_ms":20}`))
		running := e.infer(bg, "a", `{}`, InferOptions{})
		synctest.Wait()
		queued := e.infer(bg, "a", `{}`, InferOptions{})
		synctest.Wait()
		t0 := time.Now()
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 120*time.Millisecond {
			t.Fatalf("shutdown took %v, want the running request and the teardown", d)
		}
		if _, err := running.wait(); err != nil {
			t.Fatalf("admitted work: %v", err)
		}
		if _, err := queued.wait(); !errors.Is(err, ErrShuttingDown) {
			t.Fatalf("queued: %v", err)
		}
		if _, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}); !errors.Is(err, ErrShuttingDown) {
			t.Fatalf("after shutdown: %v", err)
		}
		if _, err := e.rt.Apply(bg, "b", spec(1, `{}`)); !errors.Is(err, ErrShuttingDown) {
			t.Fatalf("after shutdown: %v", err)
		}
		if n := e.fx.OpenSessions(); n != 0 {
			t.Fatalf("%d sessions open", n)
		}
	})
}

// With a deadline, Shutdown cancels backend work through its context when
// the deadline passes and returns by the deadline plus the engine's
// cancellation latency (zero for the fixture).
func TestShutdownDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(2, `{"infer_ms":3600000}`))
		long := e.infer(bg, "a", `{}`, InferOptions{})
		load := start(func() (core.ModelStatus, error) {
			return e.rt.Apply(bg, "b", spec(1, `{"gates":{"load":"never"}}`))
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		t0 := time.Now()
		err := e.rt.Shutdown(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != time.Second {
			t.Fatalf("shutdown: %v after %v, want the deadline error after 1s", err, time.Since(t0))
		}
		if _, err := long.wait(); !errors.Is(err, ErrShuttingDown) {
			t.Fatalf("running request: %v", err)
		}
		if _, err := load.wait(); !errors.Is(err, ErrBackend) {
			t.Fatalf("load at a closed gate: %v", err)
		}
		if n := e.fx.Gates().Waiting("never"); n != 0 {
			t.Fatalf("%d steps still at the gate", n)
		}
		// A second call waits for the same shutdown and returns at once.
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
	})
}
