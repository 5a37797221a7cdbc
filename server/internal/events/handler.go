package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// heartbeatEvery is how often an idle stream sends a comment line, so that
// a client that went away is noticed and proxies keep the stream open.
const heartbeatEvery = 15 * time.Second

// streamBatch bounds the events written between two flushes.
const streamBatch = 256

// handleEvents answers GET /v1/events with a text/event-stream (CONTRACT.md ui.*).
// Every event has an `id:` (a monotonic number), an `event:` line naming its
// type and a `data:` line with the Event as JSON.
//
// Where it starts: with a Last-Event-ID header (or ?last_event_id=N), after
// that event when it is still in the ring, else with `event: reset` (reload
// the state from GET /v1/models) whose id is the newest event; without one,
// at the next event, after the last ?backlog=N buffered events. Events exist
// only while the stream is watched (the hub follows the scheduler from the
// first client until two minutes after the last one left, see eventHub):
// the backlog holds what happened since then, and a resume point from
// before an unwatched time gets a reset.
//
// A client that does not keep up is dropped: its buffer is bounded, the hub
// never waits for it, and its stream ends; a write blocked longer than the
// hub's write timeout fails. A stream open when the shutdown begins stays
// open through it and ends after the shutdown_complete event, so a client
// sees every teardown the shutdown makes (a stream is no lease: the
// runtime's shutdown never waits for it, and past the deadline its
// connection is closed like any other); new streams are refused once the
// shutdown has begun. It has no timeout of its own.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	resume, last, err := lastEventID(r)
	if err != nil {
		return err
	}
	backlog := 0
	if v := r.URL.Query().Get("backlog"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > eventRing {
			return InvalidParam("backlog", "backlog must be an integer 0..%d", eventRing)
		}
		backlog = n
	}
	if s.rt.ShuttingDown() {
		return FromCode(core.CodeShuttingDown, "server is shutting down", nil)
	}
	sub, err := s.events.subscribe(resume, last, backlog)
	if err != nil {
		return FromCode(core.CodeShuttingDown, "server is shutting down", err)
	}
	defer s.events.unsubscribe(sub.c)

	rc := http.NewResponseController(w)
	timeout := s.events.writeTimeout()
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	buf := make([]byte, 0, 4096)
	buf = append(buf, "retry: 2000\n: sluice events\n\n"...)
	if sub.reset {
		buf = append(buf, "id: "...)
		buf = appendUint(buf, sub.newest)
		buf = append(buf, "\nevent: reset\ndata: {\"type\":\"reset\",\"reason\":\"last_event_id is not in the buffer\"}\n\n"...)
	}
	for i := range sub.replay {
		if buf, err = s.events.frame(buf, &sub.replay[i]); err != nil {
			return nil
		}
		if len(buf) > 64<<10 {
			if !writeFlush(w, rc, buf, timeout) {
				return nil
			}
			buf = buf[:0]
		}
	}
	if !writeFlush(w, rc, buf, timeout) {
		return nil
	}
	sub.replay = nil

	beat := time.NewTicker(heartbeatEvery)
	defer beat.Stop()
	for {
		buf = buf[:0]
		last := false // the shutdown_complete event is in buf
		select {
		case ev, ok := <-sub.c.ch:
			if !ok {
				return nil // dropped for falling behind, or the hub stopped
			}
			if buf, err = s.events.frame(buf, &ev); err != nil {
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
					if buf, err = s.events.frame(buf, &ev); err != nil {
						return nil
					}
					last = ev.Type == "shutdown_complete"
				default:
					break more
				}
			}
		case <-beat.C:
			buf = append(buf, ": ping\n\n"...)
		case <-r.Context().Done():
			return nil
		}
		if !writeFlush(w, rc, buf, timeout) || last {
			return nil
		}
	}
}

// writeFlush writes b and flushes it under a write deadline; it reports
// whether both succeeded.
func writeFlush(w http.ResponseWriter, rc *http.ResponseController, b []byte, timeout time.Duration) bool {
	if len(b) == 0 {
		return true
	}
	_ = rc.SetWriteDeadline(time.Now().Add(timeout)) // unsupported by recorders: then unbounded
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
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
		return false, 0, InvalidParam("Last-Event-ID", "Last-Event-ID must be an event id (a decimal number)")
	}
	return true, n, nil
}
