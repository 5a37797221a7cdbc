package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// lateTimers returns an env whose waiters' admission timers fire an hour
// late: a machine stalled past the deadlines, so that only the runtime's
// own deadlines (deadlines.go) can expire a ticket in time.
// The trace goes to buf and, for `make trace-check`, to SLUICE_TRACE_DIR.
func lateTimers(t *testing.T, copts core.Options, buf *lockedBuffer) *env {
	var w io.Writer = buf
	f, err := TraceFromEnv(t.Name(), copts)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		t.Cleanup(func() { f.Close() }) // after the env's shutdown (cleanups run last first)
		w = io.MultiWriter(buf, f)
	}
	e := newEnv(t, copts, withTrace(w))
	e.rt.timerLag = time.Hour
	return e
}

// traceEvents returns the trace's records in order.
func traceEvents(t *testing.T, trace []byte) []core.Record {
	t.Helper()
	var recs []core.Record
	for _, line := range bytes.Split(bytes.TrimSpace(trace), []byte("\n")) {
		var r core.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// cancelBefore checks that ticket tk is never granted and that the trace
// has its timeout (a Cancel answered server_busy) before the first Release
// that follows its submission.
func cancelBefore(t *testing.T, recs []core.Record, tk uint64) {
	t.Helper()
	sub, cancel, release := -1, -1, -1
	for i, r := range recs {
		switch {
		case r.Ef == "Grant" && r.Ticket == tk:
			t.Fatalf("ticket %d granted (record %d)", tk, i)
		case r.Ev != "" && r.Ev != "Cancel" && r.Ev != "Release" && r.Ticket == tk && sub < 0:
			sub = i
		case r.Ev == "Cancel" && r.Ticket == tk && r.Reason == "timeout" && cancel < 0:
			if i+1 >= len(recs) || recs[i+1].Ef != "Reject" || recs[i+1].Ticket != tk || recs[i+1].Code != "server_busy" {
				t.Fatalf("the timeout of ticket %d is not answered server_busy: %+v", tk, recs[i:])
			}
			cancel = i
		case r.Ev == "Release" && sub >= 0 && release < 0:
			release = i
		}
	}
	if sub < 0 || cancel < 0 || release < 0 || cancel > release {
		t.Fatalf("ticket %d: submitted at record %d, timed out at %d, first release after it at %d", tk, sub, cancel, release)
	}
}

// submitted returns the ticket of the n-th submission (from 0) in the trace.
func submitted(recs []core.Record, kind string, n int) uint64 {
	for _, r := range recs {
		if r.Ev == kind {
			if n == 0 {
				return r.Ticket
			}
			n--
		}
	}
	return 0
}

// A queued request whose admission deadline has passed is never granted,
// however late its own timer runs: the release that frees a slot past the
// deadline first expires it (server_busy), and the slot goes to the
// ticket behind it (CONTRACT.md time.admission-timeout,
// time.timeout-precedence). Its late timer then finds the ticket ended.
func TestOverdueNeverGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := core.Options{}
		var buf lockedBuffer
		e := lateTimers(t, opts, &buf)
		e.apply("a", spec(1, `{}`))
		hold, err := e.rt.Acquire(bg, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		q := e.infer(bg, "a", `{}`, InferOptions{Timeout: dur(100 * time.Millisecond)})
		synctest.Wait()
		behind := e.infer(bg, "a", `{}`, InferOptions{}) // unbounded
		synctest.Wait()
		fakeTime(174 * time.Millisecond) // past q's deadline; its timer has not run
		synctest.Wait()
		if q.finished() {
			t.Fatal("the request finished with its timer stalled and no event since its deadline")
		}
		if st := e.status("a"); st.QueuedRequests != 2 {
			t.Fatalf("want two queued: %+v", st)
		}
		hold.Release(false)
		synctest.Wait()
		if !q.finished() {
			t.Fatal("the overdue request still waits after the release")
		}
		if _, err := q.wait(); !errors.Is(err, ErrServerBusy) {
			t.Fatalf("overdue request past its deadline: %v, want server_busy", err)
		}
		if _, err := behind.wait(); err != nil {
			t.Fatalf("the request behind: %v", err)
		}
		if st := e.status("a"); st.QueuedRequests != 0 || st.ActiveSlots != 0 {
			t.Fatalf("%+v", st)
		}
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		trace := buf.Bytes()
		replayTrace(t, opts, trace)
		recs := traceEvents(t, trace)
		cancelBefore(t, recs, submitted(recs, "SubmitRequest", 1))
	})
}

// With nothing behind the overdue request, the freed slot stays free; a
// request admitted before its deadline (here: waiting for a cold load)
// is not expired by the runtime's deadlines.
func TestOverdueSlotStaysFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := core.Options{}
		var buf lockedBuffer
		e := lateTimers(t, opts, &buf)
		e.apply("a", spec(1, `{}`))
		e.apply("b", spec(1, `{"load_ms":500}`))
		if _, err := e.rt.Unload(bg, "b"); err != nil {
			t.Fatal(err)
		}
		hold, err := e.rt.Acquire(bg, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		q := e.infer(bg, "a", `{}`, InferOptions{Timeout: dur(100 * time.Millisecond)})
		cold := e.infer(bg, "b", `{}`, InferOptions{Timeout: dur(100 * time.Millisecond)}) // admitted at once, loads for 500 ms
		synctest.Wait()
		fakeTime(200 * time.Millisecond)
		hold.Release(false)
		synctest.Wait()
		if _, err := q.wait(); !errors.Is(err, ErrServerBusy) {
			t.Fatalf("overdue request: %v, want server_busy", err)
		}
		if st := e.status("a"); st.QueuedRequests != 0 || st.ActiveSlots != 0 {
			t.Fatalf("the slot is not free: %+v", st)
		}
		if _, err := cold.wait(); err != nil {
			t.Fatalf("a request admitted before its deadline: %v", err)
		}
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		replayTrace(t, opts, buf.Bytes())
	})
}

// A queued targeted manager past its admission timeout (the model's) is
// never granted either: the release that drains the model expires it, and
// the model stays loaded (CONTRACT.md time.manager-timeout).
func TestOverdueManagerNeverGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := core.Options{}
		var buf lockedBuffer
		e := lateTimers(t, opts, &buf)
		s := spec(1, `{}`)
		s.AdmissionTimeout = dur(100 * time.Millisecond)
		e.apply("a", s)
		hold, err := e.rt.Acquire(bg, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		unload := start(func() (core.ModelStatus, error) { return e.rt.Unload(bg, "a") })
		synctest.Wait()
		if st := e.status("a"); st.QueuedManagers != 1 {
			t.Fatalf("want the unload queued: %+v", st)
		}
		fakeTime(time.Second)
		synctest.Wait()
		if unload.finished() {
			t.Fatal("the manager finished with its timer stalled and no event since its deadline")
		}
		hold.Release(false)
		synctest.Wait()
		if _, err := unload.wait(); !errors.Is(err, ErrServerBusy) {
			t.Fatalf("overdue manager: %v, want server_busy", err)
		}
		if st := e.status("a"); !st.Loaded || st.QueuedManagers != 0 {
			t.Fatalf("the overdue unload ran: %+v", st)
		}
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		trace := buf.Bytes()
		replayTrace(t, opts, trace)
		recs := traceEvents(t, trace)
		cancelBefore(t, recs, submitted(recs, "SubmitManager", 1)) // the Apply's, then the Unload's
	})
}

// Overdue tickets expire in deadline order, each as its own Cancel, before
// the event that could grant them; one with a later deadline, or none,
// stays queued and gets the slot.
func TestOverdueDeadlineOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := core.Options{}
		var buf lockedBuffer
		e := lateTimers(t, opts, &buf)
		e.apply("a", spec(1, `{}`))
		hold, err := e.rt.Acquire(bg, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		var calls []*call[Result]
		for _, d := range []time.Duration{300, 100, 0, 200, 900} { // milliseconds (0: unbounded); tickets 1..5
			calls = append(calls, e.infer(bg, "a", `{}`, InferOptions{Timeout: dur(d * time.Millisecond)}))
			synctest.Wait()
		}
		fakeTime(500 * time.Millisecond)
		hold.Release(false)
		synctest.Wait()
		for i, c := range calls {
			_, err := c.wait()
			if overdue := i != 2 && i != 4; overdue != errors.Is(err, ErrServerBusy) || !overdue && err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		trace := buf.Bytes()
		replayTrace(t, opts, trace)
		recs := traceEvents(t, trace)
		var order []uint64
		for _, r := range recs {
			if r.Ev == "Cancel" && r.Reason == "timeout" {
				order = append(order, r.Ticket)
			}
		}
		want := []uint64{submitted(recs, "SubmitRequest", 2), submitted(recs, "SubmitRequest", 4), submitted(recs, "SubmitRequest", 1)}
		if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
			t.Fatalf("timeouts of tickets %v, want %v (deadline order)", order, want)
		}
		for _, tk := range want {
			cancelBefore(t, recs, tk)
		}
	})
}

// A timer on time racing a release at the same instant as its deadline:
// whichever reaches the lock first, the request is refused, never granted,
// and a late timer's Cancel on the expired ticket only wakes its waiter.
func TestDeadlineAtReleaseInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{}`))
		for i := range 20 {
			hold := e.infer(bg, "a", `{"infer_ms":100}`, InferOptions{})
			synctest.Wait()
			q := e.infer(bg, "a", `{}`, InferOptions{Timeout: dur(100 * time.Millisecond)}) // due when hold releases
			if _, err := q.wait(); !errors.Is(err, ErrServerBusy) {
				t.Fatalf("run %d: %v, want server_busy", i, err)
			}
			if _, err := hold.wait(); err != nil {
				t.Fatal(err)
			}
		}
		if st := e.status("a"); st.ActiveSlots != 0 || st.QueuedRequests != 0 {
			t.Fatalf("%+v", st)
		}
	})
}

// The deadline heap pops in (deadline, push) order after any mix of pushes
// and removals, and every waiter entry knows where its deadline is.
func TestDeadlineHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := &Runtime{}
	const n = 300
	in := map[core.Ticket]deadline{}
	for i := 1; i <= n; i++ {
		tk := core.Ticket(uint64(1)<<32 | uint64(i))
		r.addWaiterLocked(tk, nil)
		r.pushDeadlineLocked(tk, int64(rng.IntN(50)))
		in[tk] = r.dl[r.waiters[i].hp-1]
		if rng.IntN(3) == 0 { // a waiter that leaves: granted or gone
			victim := core.Ticket(uint64(1)<<32 | uint64(1+rng.IntN(i)))
			if _, ok := in[victim]; ok {
				r.takeWaiterLocked(victim)
				delete(in, victim)
			}
		}
		for j, d := range r.dl {
			if hp := r.waiters[int(uint32(d.tk))].hp; int(hp) != j+1 {
				t.Fatalf("entry %d (ticket %x) recorded at %d", j, uint64(d.tk), hp-1)
			}
		}
	}
	var prev *deadline
	for len(r.dl) > 0 {
		d := r.dl[0]
		r.removeDeadlineLocked(0)
		if prev != nil && d.before(prev) {
			t.Fatalf("popped %+v after %+v", d, *prev)
		}
		if in[d.tk] != d {
			t.Fatalf("popped %+v, pushed %+v", d, in[d.tk])
		}
		delete(in, d.tk)
		prev = &d
	}
	if len(in) != 0 {
		t.Fatalf("%d deadlines lost", len(in))
	}
}

// BenchmarkDeadlineHeap is what a queued ticket with a bounded timeout adds
// to its critical sections: one push when it queues and one removal when
// its waiter leaves (granted), with n other deadlines in the heap.
func BenchmarkDeadlineHeap(b *testing.B) {
	for _, n := range []int{0, 16, 4096} {
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			r := &Runtime{}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 1; i <= n; i++ {
				tk := core.Ticket(uint64(1)<<32 | uint64(i))
				r.addWaiterLocked(tk, nil)
				r.pushDeadlineLocked(tk, int64(rng.IntN(1<<20)))
			}
			tk := core.Ticket(uint64(1)<<32 | uint64(n+1))
			r.addWaiterLocked(tk, nil)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r.pushDeadlineLocked(tk, int64(i&(1<<20-1)))
				r.removeDeadlineLocked(int(r.waiters[n+1].hp - 1))
			}
		})
	}
}
