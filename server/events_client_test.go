package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Helpers of the event-stream tests: an SSE client of GET /v1/events and
// waits on the hub.

// sseFrame is one server-sent event as a client reads it.
type sseFrame struct {
	id    uint64
	event string
	data  string
}

func (f sseFrame) ev(t *testing.T) Event {
	t.Helper()
	var ev Event
	if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
		t.Fatalf("event %d: %v: %s", f.id, err, f.data)
	}
	return ev
}

// sseStream reads GET /v1/events over loopback on its own goroutine.
type sseStream struct {
	t      *testing.T
	status int
	frames chan sseFrame
	body   io.Closer
	done   chan struct{}
}

// openEvents opens the event stream with the given headers and query.
func (ts *tserver) openEvents(query string, hdr ...string) *sseStream {
	ts.t.Helper()
	req, err := http.NewRequest("GET", ts.url+"/v1/events"+query, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	st := &sseStream{t: ts.t, status: res.StatusCode, frames: make(chan sseFrame, 1<<14), body: res.Body, done: make(chan struct{})}
	go st.read(res.Body)
	ts.t.Cleanup(st.close)
	return st
}

func (st *sseStream) read(body io.Reader) {
	defer close(st.done)
	defer close(st.frames)
	br := bufio.NewReader(body)
	var f sseFrame
	has := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if has {
				st.frames <- f
			}
			f, has = sseFrame{}, false
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id: "):
			f.id, _ = strconv.ParseUint(line[4:], 10, 64)
			has = true
		case strings.HasPrefix(line, "event: "):
			f.event, has = line[7:], true
		case strings.HasPrefix(line, "data: "):
			f.data, has = line[6:], true
		}
	}
}

func (st *sseStream) close() {
	st.body.Close()
	<-st.done
}

// next returns the next frame, failing after waitLimit.
func (st *sseStream) next() sseFrame {
	st.t.Helper()
	select {
	case f, ok := <-st.frames:
		if !ok {
			st.t.Fatal("event stream ended")
		}
		return f
	case <-time.After(waitLimit):
		st.t.Fatal("no event within the wait limit")
	}
	return sseFrame{}
}

// until collects frames up to and including the first that matches.
func (st *sseStream) until(what string, match func(Event) bool) []sseFrame {
	st.t.Helper()
	var out []sseFrame
	for {
		f := st.next()
		out = append(out, f)
		if match(f.ev(st.t)) {
			return out
		}
		if len(out) > 10000 {
			st.t.Fatalf("no %s in 10000 events", what)
		}
	}
}

func isType(typ, model string) func(Event) bool {
	return func(ev Event) bool { return ev.Type == typ && (model == "" || ev.Model == model) }
}

// awaitClients waits until the hub has n clients.
func (ts *tserver) awaitClients(n int) {
	ts.t.Helper()
	ctx := ctxLimit(ts.t)
	for {
		st, changed := ts.s.events.Watch()
		got := st.Clients
		if got == n {
			return
		}
		select {
		case <-changed: // closed on every subscribe, unsubscribe, drop and batch
		case <-ctx.Done():
			ts.t.Fatalf("the hub never had %d clients (has %d)", n, got)
		}
	}
}

// awaitHubCaughtUp waits until the hub has published every record the
// scheduler made before the call: it sends a request for an unknown model
// as a marker and waits for its rejection in the ring.
func (ts *tserver) awaitHubCaughtUp() {
	ts.t.Helper()
	ctx := ctxLimit(ts.t)
	h := ts.s.events
	for try := 0; ; try++ {
		// A marker sent while the runtime had dropped the hub (it fell
		// behind a burst) is never seen: a reset after it says so, and the
		// marker is sent again.
		marker := fmt.Sprintf("marker-%d-%d", time.Now().UnixNano(), try)
		st, _ := h.Watch()
		from := st.Next
		ts.must(404, "POST", "/v1/models/"+marker+"/infer", `{"input":1}`)
		for again := false; !again; {
			_, changed := h.Watch()
			found := false
			for _, ev := range h.Since(from) {
				found = found || ev.Model == marker && ev.Type == "rejection"
				again = again || ev.Type == "reset"
			}
			if found {
				return
			}
			if again {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
				ts.t.Fatal("the event hub never caught up with the scheduler")
			}
		}
	}
}
