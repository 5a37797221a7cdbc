// Package sse is the server's one writer of text/event-stream answers
// (server-sent events): the stream's headers, the framing of an event
// (optional id and event lines, one data line), comments for heartbeats,
// and a flush after every write, each write bounded by its own deadline
// when the stream has one.
//
// Its users: GET /v1/events (the dashboard's stream, which re-arms a
// write deadline of its own before every write: New(w, timeout)), and
// POST /v1/models/{id}/infer with "stream": true and the OpenAI
// transcription stream (bounded by the connection's per-write deadline,
// --write-timeout, instead: New(w, 0)). The speech stream's stream_format
// "sse" still frames its own events; it moves onto a Writer the same way:
//
//	sw := sse.New(w, 0)
//	sw.Header().Set("Sluice-Slot", "0")          // extra headers, before the first event
//	if err := sw.Data(delta); err != nil { ... } // data: {...}\n\n, flushed
//	_ = sw.Event("error", body)                  // event: error\ndata: {...}\n\n
//
// (a raw audio stream, which is no SSE, keeps writing the bytes itself).
//
// A Writer sends its headers (200, Content-Type text/event-stream,
// Cache-Control no-cache, X-Accel-Buffering no) with the first write, so a
// handler that fails before it still answers with an ordinary error.
// Data must hold no line break: one event is one data line (callers
// compact JSON first).
package sse

import (
	"net/http"
	"strconv"
	"time"
)

// HeartbeatEvery is how often an idle long-lived stream sends a comment
// line (AppendComment), so that a client that went away is noticed and
// proxies keep the stream open.
const HeartbeatEvery = 15 * time.Second

// Writer writes one event stream. It is not safe for concurrent use.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	armed   bool // a write deadline was set: Close clears it
	buf     []byte
}

// New returns a Writer on w. A positive timeout bounds every write and
// flush on its own: the deadline is re-armed before each one, so a stream
// that is read stays open however long it lasts while a write blocked for
// timeout fails. 0 leaves writes to the connection's own deadlines.
func New(w http.ResponseWriter, timeout time.Duration) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// Header is the answer's header, to add to before the first write.
func (s *Writer) Header() http.Header { return s.w.Header() }

// Started reports whether the headers were sent.
func (s *Writer) Started() bool { return s.started }

// Start sends the stream's headers, once; every write does it first.
func (s *Writer) Start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
}

// Write sends b, zero or more frames already framed (AppendEvent,
// AppendComment), and flushes it, under a fresh write deadline when the
// Writer has a timeout. Empty b sends only the headers.
func (s *Writer) Write(b []byte) error {
	s.Start()
	if len(b) == 0 {
		return nil
	}
	if s.timeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // unsupported by recorders: then unbounded
		s.armed = true
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// WriteReleasing sends b, the stream's last frames, releasing the
// request's lease (release(failed)) before b's last byte:
// WriteReleasingAt(b, len(b)-1, release).
func (s *Writer) WriteReleasing(b []byte, release func(failed bool)) error {
	return s.WriteReleasingAt(b, len(b)-1, release)
}

// WriteReleasingAt sends b, the stream's last frames, releasing the
// request's lease (release(failed)) before b[at:]: b[:at] is written and
// flushed, then release is called (failed when the write failed), then
// the rest is written, unflushed (the handler's return flushes it with the
// end of the answer). The engine's work is complete when the last frames
// are written, so the slot is no longer needed; with at inside the first
// event a client acts on (at least the blank line that ends it, which an
// SSE client needs to dispatch the event), a client that sends its next
// request as soon as it has that event never finds this request's lease
// still held (CONTRACT.md phase.stream-deferred). Empty b sends the
// headers and releases.
func (s *Writer) WriteReleasingAt(b []byte, at int, release func(failed bool)) error {
	at = max(0, min(at, len(b)))
	var werr error
	if at > 0 {
		werr = s.Write(b[:at])
	} else {
		s.Start()
	}
	release(werr != nil)
	if werr != nil || at == len(b) {
		return werr
	}
	_, werr = s.w.Write(b[at:])
	return werr
}

// Data sends one unnamed event: "data: <data>\n\n".
func (s *Writer) Data(data []byte) error { return s.Event("", data) }

// Event sends one event named event ("" for none) with data as its data
// line.
func (s *Writer) Event(event string, data []byte) error {
	s.buf = AppendEvent(s.buf[:0], "", event, data)
	return s.Write(s.buf)
}

// Close clears the write deadline the Writer set, so that the connection's
// next answer (keep-alive) is not bound by it.
func (s *Writer) Close() {
	if s.armed {
		_ = s.rc.SetWriteDeadline(time.Time{})
		s.armed = false
	}
}

// AppendEvent appends one frame to b: an "id:" line when id is not "", an
// "event:" line when event is not "", the data line and the blank line that
// ends the event.
func AppendEvent(b []byte, id, event string, data []byte) []byte {
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	if event != "" {
		b = append(append(append(b, "event: "...), event...), '\n')
	}
	b = append(append(b, "data: "...), data...)
	return append(b, '\n', '\n')
}

// AppendEventID is AppendEvent with a numeric id, without an allocation.
func AppendEventID(b []byte, id uint64, event string, data []byte) []byte {
	b = strconv.AppendUint(append(b, "id: "...), id, 10)
	b = append(b, '\n')
	return AppendEvent(b, "", event, data)
}

// AppendComment appends a comment frame (": text\n\n"), which clients
// ignore: a heartbeat or a greeting.
func AppendComment(b []byte, text string) []byte {
	return append(append(append(b, ": "...), text...), '\n', '\n')
}

// AppendRetry appends the reconnection delay a client should wait after
// the stream ends ("retry: ms\n"); the blank line of the frame that
// follows (a comment, an event) ends it.
func AppendRetry(b []byte, d time.Duration) []byte {
	b = strconv.AppendInt(append(b, "retry: "...), d.Milliseconds(), 10)
	return append(b, '\n')
}
