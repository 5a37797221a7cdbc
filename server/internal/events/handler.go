package events

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/sse"
)

// streamBatch bounds the events written between two flushes.
const streamBatch = 256

// Handle answers GET /v1/events with a text/event-stream (CONTRACT.md ui.*).
// Every event has an `id:` (a monotonic number), an `event:` line naming its
// type and a `data:` line with the Event as JSON.
//
// Where it starts: with a Last-Event-ID header (or ?last_event_id=N), after
// that event when it is still in the ring, else with `event: reset` (reload
// the state from GET /v1/models) whose id is the newest event; without one,
// at the next event, after the last ?backlog=N buffered events. Events exist
// only while the stream is watched (the hub follows the scheduler from the
// first client until two minutes after the last one left, see Hub):
// the backlog holds what happened since then, and a resume point from
// before an unwatched time gets a reset.
//
// A client that does not keep up is dropped: its buffer is bounded, the hub
// never waits for it, and its stream ends; a write blocked longer than the
// hub's write timeout fails (the deadline is re-armed before every write,
// sse.Writer). A stream open when the shutdown begins stays open through it
// and ends after the shutdown_complete event, so a client sees every
// teardown the shutdown makes (a stream is no lease: the runtime's shutdown
// never waits for it, and past the deadline its connection is closed like
// any other); new streams are refused once the shutdown has begun. It has
// no timeout of its own.
func (h *Hub) Handle(w http.ResponseWriter, r *http.Request) error {
	resume, last, err := lastEventID(r)
	if err != nil {
		return err
	}
	backlog := 0
	if v := r.URL.Query().Get("backlog"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > Ring {
			return httpapi.InvalidParam("backlog", "backlog must be an integer 0..%d", Ring)
		}
		backlog = n
	}
	if h.opt.ShuttingDown != nil && h.opt.ShuttingDown() {
		return shuttingDown(nil)
	}
	sub, err := h.subscribe(resume, last, backlog)
	if err != nil {
		return shuttingDown(err)
	}
	defer h.unsubscribe(sub.c)

	sw := sse.New(w, h.writeTimeout())
	defer sw.Close()
	sw.Start()
	buf := make([]byte, 0, 4096)
	buf = sse.AppendComment(sse.AppendRetry(buf, 2*time.Second), "sluice events")
	if sub.reset {
		buf = sse.AppendEventID(buf, sub.newest, "reset", []byte(`{"type":"reset","reason":"last_event_id is not in the buffer"}`))
	}
	for i := range sub.replay {
		if buf, err = h.frame(buf, &sub.replay[i]); err != nil {
			return nil
		}
		if len(buf) > 64<<10 {
			if sw.Write(buf) != nil {
				return nil
			}
			buf = buf[:0]
		}
	}
	if sw.Write(buf) != nil {
		return nil
	}
	sub.replay = nil

	beat := time.NewTicker(sse.HeartbeatEvery)
	defer beat.Stop()
	for {
		buf = buf[:0]
		last := false // the shutdown_complete event is in buf
		select {
		case ev, ok := <-sub.c.ch:
			if !ok {
				return nil // dropped for falling behind, or the hub stopped
			}
			if buf, err = h.frame(buf, &ev); err != nil {
				return nil
			}
			last = ev.Type == "shutdown_complete"
		more:
			for n := 1; n < streamBatch && !last; n++ {
				select {
				case ev, ok := <-sub.c.ch:
					if !ok {
						break more
					}
					if buf, err = h.frame(buf, &ev); err != nil {
						return nil
					}
					last = ev.Type == "shutdown_complete"
				default:
					break more
				}
			}
		case <-beat.C:
			buf = sse.AppendComment(buf, "ping")
		case <-r.Context().Done():
			return nil
		}
		if sw.Write(buf) != nil || last {
			return nil
		}
	}
}

// shuttingDown is the 503 of a stream asked for once the shutdown began
// (the one mapping, httpapi.FromCode).
func shuttingDown(cause error) *httpapi.Error {
	return httpapi.FromCode(core.CodeShuttingDown, "server is shutting down", cause)
}

// lastEventID reads the resume point: the Last-Event-ID header, else the
// last_event_id query parameter.
func lastEventID(r *http.Request) (bool, uint64, error) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return false, 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return false, 0, httpapi.InvalidParam("Last-Event-ID", "Last-Event-ID must be an event id (a decimal number)")
	}
	return true, n, nil
}
