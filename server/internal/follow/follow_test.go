package follow

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// fakeSource is a runtime with one observer at most: it counts the
// subscriptions made and hands steps to the live one as the runtime does,
// dropping it when its buffer is full.
type fakeSource struct {
	mu        sync.Mutex
	observes  int // Observe calls
	live      int // subscriptions not yet ended
	ch        chan runtime.Step
	opt       runtime.ObserveOptions
	reobserve int
}

func (s *fakeSource) Observe(o runtime.ObserveOptions) (<-chan runtime.Step, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observes++
	s.live++
	ch := make(chan runtime.Step, o.Buffer)
	s.ch, s.opt = ch, o
	if o.Status {
		ch <- runtime.Step{Event: core.Event{Kind: core.EvNone}}
	}
	return ch, s.end
}

// end ends the live subscription on its current channel, as the runtime's
// cancel function does.
func (s *fakeSource) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		return
	}
	close(s.ch)
	s.ch = nil
	s.live--
}

func (s *fakeSource) Reobserve(ch <-chan runtime.Step, o runtime.ObserveOptions) (<-chan runtime.Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil || (<-chan runtime.Step)(s.ch) != ch {
		return nil, false
	}
	s.reobserve++
	next := make(chan runtime.Step, o.Buffer)
	if o.Status {
		next <- runtime.Step{Event: core.Event{Kind: core.EvNone}}
	}
	close(s.ch)
	s.ch, s.opt = next, o
	return next, true
}

// step sends one step numbered n (Event.Now) to the live subscription; a
// full step (Ticket set) only reaches a full one, as request steps do.
func (s *fakeSource) step(n int64, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil || full && s.opt.Lifecycle {
		return
	}
	st := runtime.Step{Event: core.Event{Kind: core.EvLoadDone, Now: n}}
	if full {
		st.Event.Kind, st.Ticket = core.EvSubmitRequest, core.Ticket(n)
	}
	select {
	case s.ch <- st:
	default:
		panic("the test's buffer is too small")
	}
}

func (s *fakeSource) counts() (observes, live, reobserve int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.observes, s.live, s.reobserve
}

// recorder is a consumer that records what it was handed.
type recorder struct {
	mu      sync.Mutex
	begins  []string
	now     []int64 // Event.Now of every step but snapshots
	snaps   int
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Begin(gen uint64, full, lost bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := "life"
	if full {
		b = "full"
	}
	if lost {
		b += "+lost"
	}
	r.begins = append(r.begins, b)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) Steps(batch []runtime.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range batch {
		if st.Event.Kind == core.EvNone {
			r.snaps++
			continue
		}
		r.now = append(r.now, st.Event.Now)
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// await waits until r has n steps and b begins.
func (r *recorder) await(t *testing.T, n, b int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		r.mu.Lock()
		got, gotB, ch := len(r.now), len(r.begins), r.changed
		r.mu.Unlock()
		if got >= n && gotB >= b {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("have %d steps and %d begins, want %d and %d", got, gotB, n, b)
		}
	}
}

// One subscription serves both consumers (the metrics and the event hub):
// the follower subscribes once, switches that subscription's options in
// place when asked for every step and back, and both consumers see every
// step of it, in order, exactly once, the switches included.
func TestOneSubscriptionServesBoth(t *testing.T) {
	src := &fakeSource{}
	metrics, hub := newRecorder(), newRecorder()
	f := Start(src, nil, metrics, hub)
	defer f.Close()
	if o, live, _ := src.counts(); o != 1 || live != 1 || !src.opt.Lifecycle {
		t.Fatalf("after Start: %d subscriptions, %d live, options %+v", o, live, src.opt)
	}
	src.step(1, false)
	src.step(2, true) // a request's step: not sent to a lifecycle observer
	metrics.await(t, 1, 1)
	g1 := f.Full(true)
	src.step(3, true)
	src.step(4, false)
	hub.await(t, 3, 2)
	if g := f.Full(true); g != g1 {
		t.Fatalf("asking again for what is in force made subscription %d, not %d", g, g1)
	}
	f.Full(false)
	src.step(5, true)
	src.step(6, false)
	for _, c := range []*recorder{metrics, hub} {
		c.await(t, 4, 3)
	}
	f.Close()
	o, live, re := src.counts()
	if o != 1 || re != 2 || live != 0 {
		t.Fatalf("%d subscriptions (want 1), %d changes of it (want 2), %d left live", o, re, live)
	}
	for name, c := range map[string]*recorder{"metrics": metrics, "hub": hub} {
		c.mu.Lock()
		if want := []int64{1, 3, 4, 6}; !equal(c.now, want) || c.snaps != 1 {
			t.Errorf("%s got steps %v and %d snapshots, want %v and 1", name, c.now, c.snaps, want)
		}
		if want := []string{"life", "full", "life"}; !equalS(c.begins, want) {
			t.Errorf("%s begins %v, want %v", name, c.begins, want)
		}
		c.mu.Unlock()
	}
}

// A subscription the runtime drops is replaced by one new subscription with
// the options in force, and the consumers are told steps were lost.
func TestDroppedResubscribes(t *testing.T) {
	src := &fakeSource{}
	c := newRecorder()
	f := Start(src, nil, c)
	defer f.Close()
	f.Full(true)
	src.step(1, true)
	c.await(t, 1, 2)
	f.Drop()
	c.await(t, 1, 3)
	src.step(2, true)
	c.await(t, 2, 3)
	f.Close()
	o, live, _ := src.counts()
	c.mu.Lock()
	defer c.mu.Unlock()
	if o != 2 || live != 0 || !equalS(c.begins, []string{"life", "full", "full+lost"}) || c.snaps != 2 {
		t.Fatalf("%d subscriptions, %d live, begins %v, %d snapshots", o, live, c.begins, c.snaps)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalS(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Switches faster than the goroutine reads lose nothing: each channel a
// switch closed is read to its end before the next one, whatever the
// goroutine had read when the switches came.
func TestSwitchesInARow(t *testing.T) {
	src := &fakeSource{}
	c := newRecorder()
	f := Start(src, nil, c)
	defer f.Close()
	src.step(1, false)
	g2 := f.Full(true)
	src.step(2, true)
	g3 := f.Full(false)
	src.step(3, false)
	g4 := f.Full(true)
	src.step(4, true)
	if g2 != 2 || g3 != 3 || g4 != 4 {
		t.Fatalf("subscription numbers %d %d %d", g2, g3, g4)
	}
	c.await(t, 4, 4)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !equal(c.now, []int64{1, 2, 3, 4}) || !equalS(c.begins, []string{"life", "full", "life", "full"}) || c.snaps != 2 {
		t.Fatalf("steps %v, begins %v, %d snapshots", c.now, c.begins, c.snaps)
	}
	if o, _, re := src.counts(); o != 1 || re != 3 {
		t.Fatalf("%d subscriptions, %d changes", o, re)
	}
}
