package events

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// fakeFollower records what the hub asks of the one runtime subscription.
type fakeFollower struct {
	gen   uint64
	calls []bool
}

func (f *fakeFollower) Full(full bool) uint64 {
	f.calls = append(f.calls, full)
	f.gen++
	return f.gen
}

type status struct {
	ID     string `json:"id"`
	Active int    `json:"active_slots"`
}

func newTestHub(t *testing.T) (*Hub, *fakeFollower) {
	t.Helper()
	h := New(Options{Epoch: time.Unix(1_800_000_000, 0),
		Status: func(st core.ModelStatus) any { return &status{ID: st.ID, Active: st.ActiveSlots} }})
	f := &fakeFollower{}
	h.Follow(f)
	t.Cleanup(h.Close)
	return h, f
}

// steps of one request on model a: submitted (queued), granted, released.
func requestSteps(now int64, tk core.Ticket) []runtime.Step {
	st := func(active, queued int) []core.ModelStatus {
		return []core.ModelStatus{{ID: "a", State: core.Ready, Loaded: true, Slots: 2, ActiveSlots: active, QueuedRequests: queued}}
	}
	return []runtime.Step{
		{Event: core.Event{Kind: core.EvSubmitRequest, Model: "a", Now: now}, Ticket: tk, Status: st(0, 1)},
		{Event: core.Event{Kind: core.EvTick, Now: now + 1e6},
			Effects: []runtime.StepEffect{{Effect: core.Effect{Kind: core.EfGrant, Ticket: tk, Slot: 1}, ID: "a"}}, Status: st(1, 0)},
		{Event: core.Event{Kind: core.EvRelease, Ticket: tk, Now: now + 2e6}, Status: st(0, 0)},
	}
}

func snapshot() runtime.Step {
	return runtime.Step{Event: core.Event{Kind: core.EvNone},
		Status: []core.ModelStatus{{ID: "a", State: core.Ready, Loaded: true, Slots: 2}}}
}

func types(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// The hub asks for every step only while watched, translates from the
// snapshot of the subscription it asked for (not an older one still
// draining), tells its clients to reload when steps were lost, and after
// its linger time without a client goes back to the lifecycle.
func TestHubFollowsItsSubscription(t *testing.T) {
	h, f := newTestHub(t)
	h.Begin(1, false, false)
	h.Steps(requestSteps(1e9, 1)) // a lifecycle subscription's steps: nobody watches
	if st, _ := h.Watch(); st.Active || st.Ring != 0 || len(f.calls) != 0 {
		t.Fatalf("unwatched: %+v, follower asked %v", st, f.calls)
	}
	sub, err := h.subscribe(false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 1 || !f.calls[0] {
		t.Fatalf("the first client asked the follower %v", f.calls)
	}
	h.Steps(requestSteps(2e9, 2)) // still the old subscription's steps
	h.Begin(2, true, false)
	h.Steps(append([]runtime.Step{snapshot()}, requestSteps(3e9, 3)...))
	evs := h.Since(0)
	if got, want := strings.Join(types(evs), " "), "queued admission release"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	for _, ev := range evs {
		if ev.T < 3e9 {
			t.Fatalf("an event of the steps before the subscription: %+v", ev)
		}
		if s, ok := ev.Status.(*status); !ok || s.ID != "a" {
			t.Fatalf("event %s without the model's status: %#v", ev.Type, ev.Status)
		}
	}
	if got := len(sub.c.ch); got != len(evs) {
		t.Fatalf("the client got %d events of %d", got, len(evs))
	}
	h.Begin(3, true, true) // the runtime dropped the follower
	if evs := h.Since(0); evs[len(evs)-1].Type != "reset" {
		t.Fatalf("no reset after lost steps: %v", types(evs))
	}

	h.SetLimits(Limits{Ring: Ring, ClientBuf: ClientBuf, WriteTimeout: time.Second, Linger: time.Millisecond})
	h.unsubscribe(sub.c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		st, changed := h.Watch()
		if !st.Active {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the hub never went back to the lifecycle")
		}
	}
	h.mu.Lock()
	calls := append([]bool(nil), f.calls...)
	h.mu.Unlock()
	if len(calls) != 2 || calls[1] {
		t.Fatalf("after the linger time the follower was asked %v", calls)
	}
}

// A resume point in the ring replays what follows it; one before the ring
// gets a reset at the newest ID; a backlog replays the newest events.
func TestHubResume(t *testing.T) {
	h, _ := newTestHub(t)
	h.SetLimits(Limits{Ring: 4, ClientBuf: ClientBuf, WriteTimeout: time.Second, Linger: time.Hour})
	first, err := h.subscribe(false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Begin(1, true, false)
	h.Steps(append([]runtime.Step{snapshot()}, requestSteps(1e9, 1)...))
	all := h.Since(0)
	if len(all) < 3 {
		t.Fatalf("%v", types(all))
	}
	st, _ := h.Watch()
	newest := st.Next - 1
	sub, _ := h.subscribe(true, newest-1, 0)
	if sub.reset || len(sub.replay) != 1 || sub.replay[0].ID != newest {
		t.Fatalf("resume after %d: reset %v, replay %v", newest-1, sub.reset, sub.replay)
	}
	sub, _ = h.subscribe(true, newest-10, 0)
	if !sub.reset || sub.newest != newest || len(sub.replay) != 0 {
		t.Fatalf("resume before the ring: reset %v at %d, replay %v", sub.reset, sub.newest, sub.replay)
	}
	sub, _ = h.subscribe(false, 0, 2)
	if len(sub.replay) != 2 || sub.replay[1].ID != newest {
		t.Fatalf("backlog 2: %v", sub.replay)
	}
	h.unsubscribe(first.c)
}

// The handler's stream: the greeting, then each event framed with its id,
// type and JSON, the wall-clock time from the epoch; a bad resume point is
// a 400 naming the field, a stream asked for in the shutdown a 503.
func TestHandle(t *testing.T) {
	h, _ := newTestHub(t)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/events?last_event_id=x", nil)
	if err := h.Handle(rec, req); err == nil || !strings.Contains(err.Error(), "Last-Event-ID") {
		t.Fatalf("bad resume point: %v", err)
	}
	if err := h.Handle(rec, httptest.NewRequest("GET", "/v1/events?backlog=-1", nil)); err == nil {
		t.Fatal("a negative backlog was accepted")
	}

	// Events published while a client watches, then a stream that replays
	// them (backlog) and ends with its request.
	watcher, err := h.subscribe(false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Begin(1, true, false)
	h.Steps(append([]runtime.Step{snapshot()}, requestSteps(1e9, 1)...))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec = httptest.NewRecorder()
	if err := h.Handle(rec, httptest.NewRequest("GET", "/v1/events?backlog=10", nil).WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	h.unsubscribe(watcher.c)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	body := rec.Body.String()
	const greeting = "retry: 2000\n: sluice events\n\n"
	if !strings.HasPrefix(body, greeting) || !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("%q", body)
	}
	frames := strings.Split(strings.TrimSuffix(strings.TrimPrefix(body, greeting), "\n\n"), "\n\n")
	if len(frames) != 3 {
		t.Fatalf("%d frames: %q", len(frames), body)
	}
	lines := strings.Split(frames[2], "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "id: ") || lines[1] != "event: release" {
		t.Fatalf("last frame %q", frames[2])
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[2], "data: ")), &ev); err != nil {
		t.Fatal(err)
	}
	if ev["time"] != "2027-01-15T08:00:01.002Z" || ev["status"].(map[string]any)["id"] != "a" {
		t.Fatalf("event %v", ev)
	}

	h2 := New(Options{ShuttingDown: func() bool { return true }})
	if err := h2.Handle(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/events", nil)); err == nil ||
		!strings.Contains(err.Error(), "shutting_down") {
		t.Fatalf("in the shutdown: %v", err)
	}
}
