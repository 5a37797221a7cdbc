package sse

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The frames are the bytes the streams sent before this package existed:
// clients and the conformance matrices parse them.
func TestFraming(t *testing.T) {
	cases := []struct{ got, want string }{
		{string(AppendEvent(nil, "", "", []byte(`{"a":1}`))), "data: {\"a\":1}\n\n"},
		{string(AppendEvent(nil, "", "error", []byte(`{}`))), "event: error\ndata: {}\n\n"},
		{string(AppendEvent(nil, "7", "x", []byte(`1`))), "id: 7\nevent: x\ndata: 1\n\n"},
		{string(AppendEventID([]byte("p"), 18446744073709551615, "load", []byte(`{}`))), "pid: 18446744073709551615\nevent: load\ndata: {}\n\n"},
		{string(AppendEventID(nil, 0, "", []byte(`[DONE]`))), "id: 0\ndata: [DONE]\n\n"},
		{string(AppendComment(AppendRetry(nil, 2*time.Second), "sluice events")), "retry: 2000\n: sluice events\n\n"},
		{string(AppendComment(nil, "ping")), ": ping\n\n"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: %q, want %q", i, c.got, c.want)
		}
	}
}

// The headers go out with the first write, with any the handler added;
// every write is flushed.
func TestWriterHeadersAndFlush(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := New(rec, 0)
	sw.Header().Set("Sluice-Slot", "3")
	if sw.Started() || rec.Flushed {
		t.Fatal("started before the first write")
	}
	if err := sw.Data([]byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	if !sw.Started() || !rec.Flushed || rec.Code != http.StatusOK {
		t.Fatalf("started %v flushed %v code %d", sw.Started(), rec.Flushed, rec.Code)
	}
	h := rec.Header()
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
		"X-Accel-Buffering": "no", "Sluice-Slot": "3"} {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
	if err := sw.Event("error", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), "data: {\"x\":1}\n\nevent: error\ndata: {}\n\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// deadlineWriter records the write deadlines set through
// http.ResponseController and fails writes once told to.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
	fail      error
}

func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if d.fail != nil {
		return 0, d.fail
	}
	return d.ResponseRecorder.Write(b)
}

// With a timeout the deadline is re-armed before every write (a long
// stream that is read stays open) and cleared by Close; without one the
// Writer sets none. A failed write is reported.
func TestWriterDeadlines(t *testing.T) {
	dw := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
	sw := New(dw, time.Hour)
	before := time.Now()
	for range 3 {
		if err := sw.Write(AppendComment(nil, "ping")); err != nil {
			t.Fatal(err)
		}
	}
	if len(dw.deadlines) != 3 {
		t.Fatalf("%d deadlines for 3 writes", len(dw.deadlines))
	}
	for i, d := range dw.deadlines {
		if d.Before(before.Add(time.Hour)) || i > 0 && d.Before(dw.deadlines[i-1]) {
			t.Fatalf("deadline %d is %v: not re-armed from the write", i, d)
		}
	}
	sw.Close()
	if last := dw.deadlines[len(dw.deadlines)-1]; !last.IsZero() {
		t.Fatalf("Close left the deadline at %v", last)
	}
	dw.fail = errors.New("broken pipe")
	if err := sw.Data([]byte(`1`)); !errors.Is(err, dw.fail) {
		t.Fatalf("a failed write gave %v", err)
	}

	none := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
	sw = New(none, 0)
	if err := sw.Data([]byte(`1`)); err != nil {
		t.Fatal(err)
	}
	sw.Close()
	if len(none.deadlines) != 0 {
		t.Fatalf("a Writer without a timeout set deadlines %v", none.deadlines)
	}
}

// The last frames go out with the lease released before the byte at
// which a client can act on them: everything before it is written and
// flushed when release runs, the rest only after; a failed write releases
// as failed (CONTRACT.md phase.stream-deferred).
func TestWriteReleasingAt(t *testing.T) {
	b := append(AppendEvent(nil, "", "", []byte(`{"type":"done"}`)), AppendEvent(nil, "", "", []byte("[DONE]"))...)
	at := len(AppendEvent(nil, "", "", []byte(`{"type":"done"}`))) - 1
	for _, c := range []struct {
		name string
		at   int
		call func(sw *Writer, release func(bool)) error
	}{
		{"at", at, func(sw *Writer, release func(bool)) error { return sw.WriteReleasingAt(b, at, release) }},
		{"last byte", len(b) - 1, func(sw *Writer, release func(bool)) error { return sw.WriteReleasing(b, release) }},
	} {
		rec := httptest.NewRecorder()
		sw := New(rec, 0)
		released := 0
		err := c.call(sw, func(failed bool) {
			released++
			if failed {
				t.Errorf("%s: released as failed", c.name)
			}
			if got := rec.Body.String(); got != string(b[:c.at]) || !rec.Flushed {
				t.Errorf("%s: at release the client had %q (flushed %v), want %q", c.name, got, rec.Flushed, b[:c.at])
			}
		})
		if err != nil || released != 1 || rec.Body.String() != string(b) {
			t.Errorf("%s: err %v, released %d times, body %q", c.name, err, released, rec.Body.String())
		}
	}
	failed := false
	sw := New(failingWriter{httptest.NewRecorder()}, 0)
	if err := sw.WriteReleasing(b, func(f bool) { failed = f }); err == nil || !failed {
		t.Errorf("a failed write: err %v, released as failed %v", err, failed)
	}
}

// failingWriter fails every body write.
type failingWriter struct{ *httptest.ResponseRecorder }

func (f failingWriter) Write([]byte) (int, error) { return 0, errors.New("gone") }
