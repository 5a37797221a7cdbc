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
// Its core has lateOpts; the trace goes to the returned buffer (for
// replayTrace) and, for `make trace-check`, to SLUICE_TRACE_DIR.
func lateTimers(t *testing.T) (*env, *lockedBuffer) {
	buf := new(lockedBuffer)
	var w io.Writer = buf
	f, err := TraceFromEnv(t.Name(), lateOpts)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		t.Cleanup(func() { f.Close() }) // after the env's shutdown (cleanups run last first)
		w = io.MultiWriter(buf, f)
	}
	e := newEnv(t, lateOpts, withTrace(w))
	e.rt.timerLag = time.Hour
	return e, buf
}

// lateOpts are the core options of lateTimers' env and of its replay.
var lateOpts = core.Options{}

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
		e, buf := lateTimers(t)
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
		replayTrace(t, lateOpts, trace)
		recs := traceEvents(t, trace)
		cancelBefore(t, recs, submitted(recs, "SubmitRequest", 1))
	})
}

// With nothing behind the overdue request, the freed slot stays free; a
// request admitted before its deadline (here: waiting for a cold load)
// is not expired by the runtime's deadlines.
func TestOverdueSlotStaysFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, buf := lateTimers(t)
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
		replayTrace(t, lateOpts, buf.Bytes())
	})
}

// A queued targeted manager past its admission timeout (the model's) is
// never granted either: the release that drains the model expires it, and
// the model stays loaded (CONTRACT.md time.manager-timeout).
func TestOverdueManagerNeverGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, buf := lateTimers(t)
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
		replayTrace(t, lateOpts, trace)
		recs := traceEvents(t, trace)
		cancelBefore(t, recs, submitted(recs, "SubmitManager", 1)) // the Apply's, then the Unload's
	})
}

// Overdue tickets expire in deadline order, each as its own Cancel, before
// the event that could grant them; one with a later deadline, or none,
// stays queued and gets the slot.
func TestOverdueDeadlineOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, buf := lateTimers(t)
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
		replayTrace(t, lateOpts, trace)
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

// The deadline heap pops in (deadline, push) order, and a prune keeps
// exactly the live entries, in heap order.
func TestDeadlineHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q deadlineHeap
	gone := map[core.Ticket]bool{} // entries whose ticket left the queue
	pushed := map[core.Ticket]deadline{}
	live := func(d deadline) bool { return !gone[d.tk] }
	for i := 1; i <= 1000; i++ {
		tk := core.Ticket(uint64(1)<<32 | uint64(i))
		if q.full() {
			before := len(q.h)
			q.prune(live)
			want := 0
			for tk := range pushed {
				if !gone[tk] {
					want++
				}
			}
			if len(q.h) != want || q.compact != 2*want || before < minCompact {
				t.Fatalf("prune of %d entries kept %d (want %d), next at %d", before, len(q.h), want, q.compact)
			}
			for tk := range gone {
				delete(pushed, tk)
			}
			clear(gone)
		}
		at := int64(rng.IntN(50))
		q.push(tk, at)
		pushed[tk] = deadline{at: at, seq: q.seq, tk: tk}
		if rng.IntN(3) > 0 { // granted: it stays in the heap until due or pruned
			gone[core.Ticket(uint64(1)<<32|uint64(1+rng.IntN(i)))] = true
		}
	}
	if len(q.h) > 2*max(len(pushed)-len(gone), minCompact) {
		t.Fatalf("%d entries for %d live tickets", len(q.h), len(pushed)-len(gone))
	}
	var prev *deadline
	for len(q.h) > 0 {
		d := q.pop()
		if prev != nil && d.before(prev) {
			t.Fatalf("popped %+v after %+v", d, *prev)
		}
		if pushed[d.tk] != d {
			t.Fatalf("popped %+v, pushed %+v", d, pushed[d.tk])
		}
		delete(pushed, d.tk)
		prev = &d
	}
	if len(pushed) != 0 {
		t.Fatalf("%d deadlines lost", len(pushed))
	}
}

// BenchmarkDeadlineHeap is what a queued ticket with a bounded timeout adds
// to its critical sections: one push when it queues (deadlines in order,
// as with one timeout for all) and, when it comes due, one pop, with n
// other deadlines in the heap.
func BenchmarkDeadlineHeap(b *testing.B) {
	for _, n := range []int{0, 16, 4096} {
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			var q deadlineHeap
			for i := 1; i <= n; i++ {
				q.push(core.Ticket(uint64(1)<<32|uint64(i)), int64(i))
			}
			q.compact = 1 << 30 // never prune: nothing here leaves
			tk := core.Ticket(uint64(1)<<32 | uint64(n+1))
			b.ReportAllocs()
			for i := int64(n + 1); b.Loop(); i++ {
				q.push(tk, i)
				q.pop()
			}
		})
	}
}

// Entries of granted tickets stay in the heap until pruned: however many
// tickets with a long timeout queue and are granted, the heap stays within
// twice the queued ones (at least minCompact), and the trace replays.
func TestDeadlineHeapBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, buf := lateTimers(t)
		e.apply("a", spec(1, `{}`))
		hold, err := e.rt.Acquire(bg, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			next := start(func() (*Lease, error) { return e.rt.Acquire(bg, "a", dur(time.Hour)) })
			synctest.Wait()
			hold.Release(false)
			if hold, err = next.wait(); err != nil {
				t.Fatal(err)
			}
			e.rt.mu.Lock()
			n := len(e.rt.dl.h)
			e.rt.mu.Unlock()
			if n > 2*minCompact {
				t.Fatalf("after %d grants: %d heap entries, none queued", i+1, n)
			}
		}
		hold.Release(false)
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		replayTrace(t, lateOpts, buf.Bytes())
	})
}
