package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/server/internal/events"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The stream carries a model's whole life in machine order, with IDs one
// apart, and each event's status is the model's status right after its
// scheduler step.
func TestEventsOrderAndCounters(t *testing.T) {
	ts := startServer(t, nil)
	st := ts.openEvents("")
	if st.status != 200 {
		t.Fatalf("status %d", st.status)
	}
	ts.awaitClients(1)
	ts.put("a", `{"engine":"fixture","slots":2,"options":{"capacity":4}}`)
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	ts.must(200, "POST", "/v1/models/a/unload", "")
	frames := st.until("unloaded state", func(ev Event) bool { return ev.Type == "state" && ev.To == "unloaded" })

	var types []string
	for i, f := range frames {
		if i > 0 && f.id != frames[i-1].id+1 {
			t.Fatalf("ids not consecutive: %d after %d", f.id, frames[i-1].id)
		}
		ev := f.ev(t)
		if ev.ID != f.id || ev.Type != f.event {
			t.Fatalf("frame %d/%s carries %d/%s", f.id, f.event, ev.ID, ev.Type)
		}
		if when, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil || time.Since(when) > time.Hour {
			t.Fatalf("event time %q: %v", ev.Time, err)
		}
		if ev.Model != "a" {
			continue
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "admission":
			if ev.Status == nil || ev.Status.ActiveSlots != 1 || ev.Status.State != "ready" || ev.WaitMS == nil || ev.Slot == nil {
				t.Fatalf("admission: %s", f.data)
			}
		case "release":
			if ev.Status == nil || ev.Status.ActiveSlots != 0 {
				t.Fatalf("release: %s", f.data)
			}
		case "loaded":
			if ev.Capacity != 4 || ev.Status.MaxParallelSlots == nil || *ev.Status.MaxParallelSlots != 4 || ev.TookMS == nil {
				t.Fatalf("loaded: %s", f.data)
			}
		case "unload":
			if ev.Cause != "unload" {
				t.Fatalf("unload: %s", f.data)
			}
		}
	}
	want := []string{"registered", "manager", "load", "loaded", "done", "admission", "release", "manager", "unload", "unloaded"}
	if !subsequence(types, want) {
		t.Fatalf("types %v lack %v in order", types, want)
	}
	for _, tr := range [][2]string{{"loading", "ready"}, {"ready", "unloading"}, {"unloading", "unloaded"}} {
		found := false
		for _, f := range frames {
			ev := f.ev(t)
			found = found || ev.Type == "state" && ev.From == tr[0] && ev.To == tr[1]
		}
		if !found {
			t.Fatalf("no transition %s -> %s in %v", tr[0], tr[1], types)
		}
	}
}

func subsequence(have, want []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// Rejections name their code and reason; unknown models count as not_found.
func TestEventsRejection(t *testing.T) {
	ts := startServer(t, nil)
	st := ts.openEvents("")
	ts.awaitClients(1)
	ts.must(404, "POST", "/v1/models/nobody/infer", `{"input":1}`)
	f := st.until("rejection", isType("rejection", ""))
	ev := f[len(f)-1].ev(t)
	if ev.Code != "not_found" || ev.Reason != "refused_on_arrival" || ev.Kind != "request" {
		t.Fatalf("%s", f[len(f)-1].data)
	}

	// A queued request whose admission timeout passes: reason timeout.
	ts.put("b", `{"engine":"fixture","slots":1}`)
	held := make(chan resp, 1)
	go func() { held <- ts.do("POST", "/v1/models/b/infer", `{"input":{"gate":"hold"}}`) }()
	ts.awaitGate("hold", 1)
	ts.must(503, "POST", "/v1/models/b/infer", `{"input":1,"admission_timeout_ms":20}`)
	fr := st.until("rejection of b", isType("rejection", "b"))
	ev = fr[len(fr)-1].ev(t)
	if ev.Code != "server_busy" || ev.Kind != "request" || ev.WaitMS == nil {
		t.Fatalf("%s", fr[len(fr)-1].data)
	}
	if ev.Reason != "timeout" && ev.Reason != "refused_on_arrival" {
		t.Fatalf("reason %q", ev.Reason)
	}
	ts.s.Fixture().Gates().Open("hold")
	if r := <-held; r.status != 200 {
		t.Fatalf("held request: %d %s", r.status, r.body)
	}
}

// A client that resumes with Last-Event-ID gets exactly the events it
// missed; a backlog replays the newest buffered events.
func TestEventsResume(t *testing.T) {
	ts := startServer(t, nil)
	st := ts.openEvents("")
	ts.awaitClients(1)
	ts.put("a", `{"engine":"fixture"}`)
	first := st.until("done", isType("done", "a"))
	last := first[len(first)-1].id
	st.close()
	ts.awaitClients(0)

	for range 3 {
		ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	}
	live := ts.openEvents("", "Last-Event-ID", strconv.FormatUint(last, 10))
	missed := live.until("third release", func() func(Event) bool {
		n := 0
		return func(ev Event) bool {
			if ev.Type == "release" {
				n++
			}
			return n == 3
		}
	}())
	for i, f := range missed {
		if f.id != last+1+uint64(i) {
			t.Fatalf("resumed at %d, frame %d has id %d (want %d)", last, i, f.id, last+1+uint64(i))
		}
	}
	var types []string
	for _, f := range missed {
		types = append(types, f.event)
	}
	if !subsequence(types, []string{"admission", "release", "admission", "release", "admission", "release"}) {
		t.Fatalf("resumed events %v", types)
	}

	// The same resume point through the query parameter.
	q := ts.openEvents("?last_event_id=" + strconv.FormatUint(last, 10))
	if f := q.next(); f.id != last+1 {
		t.Fatalf("query resume started at %d, want %d", f.id, last+1)
	}

	// A backlog without a resume point.
	b := ts.openEvents("?backlog=2")
	f1, f2 := b.next(), b.next()
	newest := missed[len(missed)-1].id
	if f2.id != f1.id+1 || f2.id < newest {
		t.Fatalf("backlog gave %d, %d; newest was %d", f1.id, f2.id, newest)
	}

	ts.must(400, "GET", "/v1/events", "", "Last-Event-ID", "x").errType(t)
	ts.must(400, "GET", "/v1/events?backlog=-1", "").errType(t)
}

// An ID older than the ring is answered with `event: reset` at the newest
// ID, then the stream goes on live.
func TestEventsResetWhenTooOld(t *testing.T) {
	ts := startServer(t, nil)
	ts.s.events.SetLimits(events.Limits{Ring: 8, ClientBuf: events.ClientBuf, WriteTimeout: waitLimit})
	st := ts.openEvents("")
	ts.awaitClients(1)
	ts.put("a", `{"engine":"fixture"}`)
	first := st.next().id
	for range 10 {
		ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	}
	frames := st.until("tenth release", func() func(Event) bool {
		n := 0
		return func(ev Event) bool {
			if ev.Type == "release" {
				n++
			}
			return n == 10
		}
	}())
	newest := frames[len(frames)-1].id

	old := ts.openEvents("", "Last-Event-ID", strconv.FormatUint(first, 10))
	f := old.next()
	if f.event != "reset" || f.id != newest {
		t.Fatalf("got %s id %d, want reset at %d", f.event, f.id, newest)
	}
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	if f := old.next(); f.id != newest+1 {
		t.Fatalf("after the reset: id %d, want %d", f.id, newest+1)
	}
	// An ID from the future (another process) is a reset too.
	future := ts.openEvents("", "Last-Event-ID", strconv.FormatUint(newest+1000, 10))
	if f := future.next(); f.event != "reset" {
		t.Fatalf("future id: %s", f.event)
	}
}

// A client that stops reading is dropped, never waited on: thousands of
// requests run through the scheduler while it reads nothing, the hub drops
// it once its bounded buffer is full, and a new client then works.
func TestEventsSlowClientDropped(t *testing.T) {
	ts := startServer(t, nil)
	ts.s.events.SetLimits(events.Limits{Ring: events.Ring, ClientBuf: 16, WriteTimeout: waitLimit})
	ts.put("a", `{"engine":"fixture","slots":4}`)

	// The stalled client: a raw connection with a small receive buffer that
	// sends the request and never reads. It is the hub's only client.
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	ts.awaitClients(1)

	rt := ts.s.Runtime()
	ctx := ctxLimit(t)
	const workers, atLeast, atMost = 4, 3000, 200000
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	requests := 0
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				n := requests
				mu.Unlock()
				if n >= atMost || n >= atLeast && dropped(ts) > 0 {
					return
				}
				if _, err := rt.Infer(ctx, "a", backends.Request{Input: json.RawMessage(`1`)}, runtime.InferOptions{}); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				mu.Lock()
				requests++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	if n := dropped(ts); n != 1 {
		t.Fatalf("%d clients dropped after %d requests, want the stalled one", n, requests)
	}
	t.Logf("the stalled client was dropped; %d requests ran meanwhile", requests)
	ts.awaitClients(0)
	// The hub may still be translating the burst: let it catch up, so that
	// the new client (with the default buffer) is not dropped by its tail.
	ts.s.events.SetLimits(events.Limits{Ring: events.Ring, ClientBuf: events.ClientBuf, WriteTimeout: waitLimit})
	ts.awaitHubCaughtUp()
	after := ts.openEvents("")
	ts.awaitClients(1)
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	after.until("admission", isType("admission", "a"))
}

// A stream open when the shutdown begins shows the shutdown's teardowns and
// ends after shutdown_complete; the shutdown is not held up, and new
// streams are refused meanwhile.
func TestEventsEndAtShutdown(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	st := ts.openEvents("")
	ts.awaitClients(1)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := ts.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var types []string
	unload := false
	for f := range st.frames { // shutdown events, then the end of the stream
		if f.event == "" {
			continue
		}
		ev := f.ev(t)
		types = append(types, ev.Type)
		unload = unload || ev.Type == "unload" && ev.Model == "a" && ev.Cause == "shutdown"
	}
	if len(types) == 0 || types[len(types)-1] != "shutdown_complete" || !unload {
		t.Fatalf("the stream showed %v; want the shutdown's unload of a, ending with shutdown_complete", types)
	}
}

// The stream follows every path exactly: after evictions, probes, refused
// and failed loads, timeouts, disconnects and a bulk unload, the last
// status the stream gave for each model is the model's status now.
func TestEventsStatusStaysExact(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxLoadedModels = 2 })
	st := ts.openEvents("")
	ts.awaitClients(1)
	ts.put("a", `{"engine":"fixture","slots":2,"options":{"capacity":4}}`)
	ts.put("b", `{"engine":"fixture"}`)
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	ts.must(200, "POST", "/v1/models/b/infer", `{"input":1}`)
	ts.put("c", `{"engine":"fixture","slots":2}`) // evicts the least recently used
	ts.put("a", `{"engine":"fixture","slots":3,"options":{"capacity":4}}`)
	ts.must(400, "PUT", "/v1/models/a", `{"engine":"fixture","slots":8,"options":{"capacity":4}}`)
	ts.must(500, "PUT", "/v1/models/d", `{"engine":"fixture","options":{"fail_load":true}}`)

	// A timeout behind a held slot, and a disconnect while queued.
	ts.put("e", `{"engine":"fixture","slots":1}`)
	held := make(chan resp, 1)
	go func() { held <- ts.do("POST", "/v1/models/e/infer", `{"input":{"gate":"e-hold"}}`) }()
	ts.awaitGate("e-hold", 1)
	ts.must(503, "POST", "/v1/models/e/infer", `{"input":1,"admission_timeout_ms":1}`)
	all := st.until("the timeout on e", isType("rejection", "e"))
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := ts.s.Runtime().Infer(ctx, "e", backends.Request{Input: json.RawMessage(`1`)}, runtime.InferOptions{})
		gone <- err
	}()
	all = append(all, st.until("queued on e", isType("queued", "e"))...)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("a cancelled queued request succeeded")
	}
	ts.s.Fixture().Gates().Open("e-hold")
	if r := <-held; r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	ts.must(200, "POST", "/v1/models/unload", `{"models":["a","b","zz"]}`)
	ts.must(404, "POST", "/v1/models/nobody/infer", `{"input":1}`) // a marker: the last event
	last := map[string]Model{}
	seen := map[string]bool{}
	for _, f := range append(all, st.until("marker", isType("rejection", "nobody"))...) {
		ev := f.ev(t)
		if ev.Status != nil {
			last[ev.Model] = *ev.Status
		}
		seen[ev.Type] = true
		if ev.Type == "rejection" {
			seen["rejection:"+ev.Code+":"+ev.Reason] = true
		}
	}
	for _, want := range []string{"eviction", "probe", "load_failed", "bulk_unload", "rejection:cancelled:disconnect"} {
		if !seen[want] {
			t.Errorf("no %s event; saw %v", want, seen)
		}
	}
	var list ModelList
	ts.must(200, "GET", "/v1/models", "").json(t, &list)
	for _, m := range list.Data {
		got, _ := json.Marshal(last[m.ID])
		want, _ := json.Marshal(m)
		if string(got) != string(want) {
			t.Fatalf("model %s: stream says %s, status is %s", m.ID, got, want)
		}
	}
}

// After a dropped subscription clients get a reset and events still carry
// statuses (the hub starts again from a snapshot); the committed spec does
// not depend on the hub.
func TestEventsSubscriptionLost(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":2}`)
	st := ts.openEvents("")
	ts.awaitClients(1)
	ts.s.follow.Drop() // what the runtime does with a follower that fell behind
	// Events of the PUT may still arrive first: the hub runs behind the
	// scheduler.
	fr := st.until("reset", isType("reset", ""))
	if f := fr[len(fr)-1]; f.event != "reset" || !strings.Contains(f.data, "fell behind") {
		t.Fatalf("%s %s", f.event, f.data)
	}
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	fr = st.until("release", isType("release", "a"))
	if ev := fr[len(fr)-1].ev(t); ev.Status == nil || ev.Status.ID != "a" {
		t.Fatalf("%s", fr[len(fr)-1].data)
	}
	if body := string(ts.must(200, "GET", "/v1/models/a/spec", "").body); !strings.Contains(body, `"slots":2`) {
		t.Fatal(body)
	}
}

// The hub follows the scheduler only while watched: requests with no client
// build no events; the first client starts it from a snapshot of every
// model, with exact statuses; after its linger time without a client it stops, and
// a resume point from before that gets a reset.
func TestEventsHubFollowsOnlyWhileWatched(t *testing.T) {
	ts := startServer(t, nil)
	h := ts.s.events
	h.SetLimits(events.Limits{Ring: events.Ring, ClientBuf: events.ClientBuf, WriteTimeout: waitLimit, Linger: time.Millisecond})
	ts.put("a", `{"engine":"fixture","slots":2}`)
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	awaitActive := func(want bool) {
		t.Helper()
		ctx := ctxLimit(t)
		for {
			st, changed := h.Watch()
			if st.Active == want {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("the hub never became active=%v", want)
			}
		}
	}
	awaitActive(false)
	if st, _ := h.Watch(); st.Ring != 0 {
		t.Fatalf("%d events exist though nobody watched", st.Ring)
	}

	st := ts.openEvents("")
	ts.awaitClients(1)
	awaitActive(true)
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	fr := st.until("release", isType("release", "a"))
	last := fr[len(fr)-1]
	if ev := last.ev(t); ev.Status == nil || ev.Status.ActiveSlots != 0 || ev.Status.Slots != 2 {
		t.Fatalf("status after the snapshot: %s", last.data)
	}
	st.close()
	ts.awaitClients(0)
	awaitActive(false) // lingered 1 ms without a client

	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`) // unwatched
	again := ts.openEvents("", "Last-Event-ID", strconv.FormatUint(last.id, 10))
	if f := again.next(); f.event != "reset" {
		t.Fatalf("resume across the unwatched time gave %q %s, want reset", f.event, f.data)
	}
}

// The Tick that ends a load backoff is in the stream: the model's status
// says backing_off until the backoff's end and not after it
// (fail.load-backoff).
func TestEventsBackoffEnds(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.LoadBackoff, c.LoadBackoffMax = 20*time.Millisecond, 20*time.Millisecond })
	st := ts.openEvents("")
	ts.awaitClients(1)
	ts.must(500, "PUT", "/v1/models/d", `{"engine":"fixture","options":{"fail_load":true}}`)
	st.until("backing off", func(ev Event) bool { return ev.Model == "d" && ev.Status != nil && ev.Status.BackingOff })
	fr := st.until("the backoff's end", func(ev Event) bool { return ev.Model == "d" && ev.Status != nil && !ev.Status.BackingOff })
	if ev := fr[len(fr)-1].ev(t); ev.Type != "status" || ev.Status.LoadFailures != 1 {
		t.Fatalf("the backoff ended with %s", fr[len(fr)-1].data)
	}
}

// dropped is how many clients the hub dropped for falling behind.
func dropped(ts *tserver) int64 {
	st, _ := ts.s.events.Watch()
	return st.Dropped
}
