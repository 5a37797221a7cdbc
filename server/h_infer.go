package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/sse"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// jsonContentType is the Content-Type header value of JSON answers (shared,
// never modified).
var jsonContentType = []string{"application/json"}

// AdmissionTimeoutHeader sets a request's admission timeout in milliseconds
// when the body does not (the server ceiling bounds it).
const AdmissionTimeoutHeader = "Sluice-Admission-Timeout-Ms"

// handleInfer answers POST /v1/models/{id}/infer:
//
//	(1) validate the ID and the body; the body is read completely first, so
//	    a client that goes away from now on cancels the request's context;
//	(2) admission through the model's FIFO (runtime.Acquire): a queued
//	    client that disconnects leaves the queue at once (CONTRACT.md
//	    phase.queued), a refusal is 503 server_busy with Retry-After;
//	(3) the engine call on the leased session under the request's context;
//	(4) the answer is encoded whole, all but its last byte written and
//	    flushed, then the lease released and the last byte written
//	    (CONTRACT.md phase.executing: a client that has its answer never
//	    finds the lease still held). Streams: see stream.
func (s *Server) handleInfer(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r) // (1)
	if err != nil {
		return err
	}
	var req InferRequest
	if err := edge.Decode(r, &req); err != nil {
		return err
	}
	if err := wire.ParseInfer(&req); err != nil {
		return err
	}
	timeout, err := admissionTimeout(r, req.AdmissionTimeoutMS)
	if err != nil {
		return err
	}
	ctx := r.Context()
	lease, err := s.rt.Acquire(ctx, id, timeout) // (2)
	if err != nil {
		return httpapi.FromRuntime(err)
	}
	defer lease.Release(true) // a no-op once released below
	breq := backends.Request{ID: httpapi.RequestID(ctx), Input: req.Input, Stream: req.Stream}
	if req.Stream {
		return s.stream(w, r, lease, breq)
	}
	out, err := lease.Infer(ctx, breq, nil) // (3)
	if err != nil {
		return httpapi.FromRuntime(err)
	}
	res := wire.InferResult{ID: breq.ID, Output: out.JSON, ConfigVersion: lease.Version(), Slot: lease.Slot(),
		ContentType: out.ContentType, Data: out.Data}
	buf := answerBufs.Get().(*bytes.Buffer)
	defer putAnswerBuf(buf)
	if err := json.NewEncoder(buf).Encode(&res); err != nil { // json.Marshal's bytes and a newline
		return fmt.Errorf("server: encode answer: %w", err)
	}
	b := buf.Bytes()
	h := w.Header() // (4)
	h["Content-Type"] = jsonContentType
	if len(b) > autoLengthMax { // smaller: net/http sends the same Content-Length itself
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
	}
	if werr := httpapi.WriteReleasing(ctx, w, b, func(failed bool) { lease.Release(failed) }); werr != nil {
		httpapi.Logger(ctx).Debug("answer not delivered", "err", werr)
	}
	return nil
}

// autoLengthMax is net/http's buffer before chunking: an answer of at most
// that many bytes is still whole in it when the handler returns, and
// net/http then sends its Content-Length without the handler setting the
// header (one allocation and one sorted header less); a longer one would
// go chunked without it.
const autoLengthMax = 2048

// answerBufs holds the buffers answers are encoded in: the response
// writer copies what it is given, so a buffer is free again once the
// answer is written.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer bounds the buffers kept: a rare large answer does not
// pin its memory in the pool.
const maxPooledAnswer = 64 << 10

func putAnswerBuf(b *bytes.Buffer) {
	if b.Cap() > maxPooledAnswer {
		return
	}
	b.Reset()
	answerBufs.Put(b)
}

// admissionTimeout returns the request's admission timeout override: the
// body's admission_timeout_ms, else the Sluice-Admission-Timeout-Ms header,
// else nil (the model's or the server's default). 0 waits without bound;
// the server ceiling (--admission-ceiling) bounds every value in the core.
func admissionTimeout(r *http.Request, body *int64) (*time.Duration, error) {
	ms := body
	if ms == nil {
		if h := httpapi.HeaderValue(r.Header, AdmissionTimeoutHeader); h != "" {
			v, err := strconv.ParseInt(h, 10, 64)
			if err != nil || v < 0 || v > runtime.MaxTimeoutMS {
				return nil, httpapi.InvalidParam(AdmissionTimeoutHeader, "%s must be an integer 0..%d", AdmissionTimeoutHeader, runtime.MaxTimeoutMS)
			}
			ms = &v
		}
	}
	if ms == nil {
		return nil, nil
	}
	d := time.Duration(*ms) * time.Millisecond
	return &d, nil
}

// stream answers a streamed request as text/event-stream: one "data:" event
// per chunk, flushed as it comes, then "data: [DONE]". The lease is
// released once the engine has returned, before the last byte of [DONE]
// (sse.Writer.WriteReleasing: a client that has read [DONE] never finds the
// lease still held), or when a write fails (CONTRACT.md
// phase.stream-deferred): a failed write makes the emit
// callback fail, which stops the engine, and a client that goes away
// cancels the request's context, which stops it too. A client that accepts
// no bytes for --write-timeout fails the blocked write (every socket write
// has that deadline, internal/edge; CONTRACT.md edge.write-timeout), so a stream
// nobody reads releases its lease and a barrier queued behind it goes on.
// Headers are sent with
// the first chunk, so a failure before it is an ordinary error answer;
// after it, the failure is reported as an "event: error" and the stream
// ends without [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, breq backends.Request) error {
	return s.streamEvents(w, r, lease, breq, nil, nil)
}

// streamEvents is stream with each engine chunk turned into the events
// events returns (nil: the chunk itself), e.g. an API's event objects. An
// event closing reports true for (an API's own last event, e.g. a
// transcript's done) is held until the engine returned and sent with
// [DONE], so that the lease is released before it completes too.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, breq backends.Request,
	events func(json.RawMessage) ([][]byte, error), closing func([]byte) bool) error {
	sw := sse.New(w, 0) // the connection's per-write deadline bounds it (edge/conn.go)
	head := func() {
		if !sw.Started() { // headers with the first event: an earlier failure is an ordinary answer
			h := sw.Header()
			h.Set("Sluice-Slot", strconv.Itoa(lease.Slot()))
			h.Set("Sluice-Config-Version", strconv.FormatUint(lease.Version(), 10))
		}
	}
	var held [][]byte // closing events, sent with [DONE]
	send := func(data []byte) error {
		if closing != nil && closing(data) {
			held = append(held, data)
			return nil
		}
		for _, e := range held { // an event after a closing one: keep the order
			head()
			if err := sw.Data(e); err != nil {
				return err
			}
		}
		held = held[:0]
		head()
		return sw.Data(data)
	}
	_, err := lease.Infer(r.Context(), breq, func(chunk json.RawMessage) error {
		if bytes.ContainsAny(chunk, "\r\n") { // one event per chunk: no line breaks inside
			var c bytes.Buffer
			if err := json.Compact(&c, chunk); err != nil {
				return fmt.Errorf("server: chunk is not JSON: %w", err)
			}
			chunk = c.Bytes()
		}
		if events == nil {
			return send(chunk)
		}
		evs, err := events(chunk)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := send(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		lease.Release(true)
		if !sw.Started() {
			return httpapi.FromRuntime(err)
		}
		if runtime.CodeOf(err) != core.CodeCancelled {
			b, _ := json.Marshal(httpapi.WireOf(httpapi.FromRuntime(err)))
			_ = sw.Event("error", b)
			httpapi.Logger(r.Context()).Error("stream failed", "err", err)
		}
		return nil
	}
	// The held events and [DONE], the lease released before the first of
	// them is complete: a client that acts on a closing event or on [DONE]
	// never finds this lease.
	var last []byte
	for _, e := range held {
		last = sse.AppendEvent(last, "", "", e)
	}
	last = sse.AppendEvent(last, "", "", []byte("[DONE]"))
	at := len(last) - 1
	if len(held) > 0 {
		at = len(sse.AppendEvent(nil, "", "", held[0])) - 1
	}
	head()
	_ = sw.WriteReleasingAt(last, at, func(failed bool) { lease.Release(failed) })
	return nil
}

// writeErrorEvent ends a stream that failed after its first bytes with an
// "event: error" carrying the API's error body (CONTRACT.md
// fail.execution); buf is scratch space.
//
// Kept for the speech stream until it writes through sse.Writer (then:
// sw.Event("error", b) as streamEvents does).
func writeErrorEvent(w http.ResponseWriter, rc *http.ResponseController, buf []byte, e *httpapi.Error) {
	b, _ := json.Marshal(httpapi.WireOf(e))
	_, _ = w.Write(sse.AppendEvent(buf[:0], "", "error", b))
	_ = rc.Flush()
}
