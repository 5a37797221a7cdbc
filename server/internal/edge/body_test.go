package edge

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// The edge's own tests of bodies: what a handler gets and what is given
// back, without a server. Package server's tests (edge_body_test.go,
// net_body_test.go) drive the same code over real connections.

// writeStatus stands in for the server's error writer: the status of an
// *Error, and its code as the body.
func writeStatus(w http.ResponseWriter, _ *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError}
	}
	w.WriteHeader(e.Status)
	_, _ = io.WriteString(w, e.Code)
}

func testEdge(t *testing.T, cfg Config) *Edge {
	t.Helper()
	cfg.WriteError, cfg.Log = writeStatus, slog.New(slog.DiscardHandler)
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ReadBody: a declared length over the limit is refused before any read
// (and the body phase is not ended: nothing was read), a body over the
// limit without one is 413 after limit+1 bytes, and a body within it is
// returned whole; end sees each reading's error (edge.json-limit).
func TestReadBody(t *testing.T) {
	var ended []error
	end := func(err error) { ended = append(ended, err) }
	var e *Error
	if _, err := ReadBody(strings.NewReader("{}"), 11, 10, end); !errors.As(err, &e) || e.Status != 413 || len(ended) != 0 {
		t.Fatalf("declared over the limit: %v, ended %v", err, ended)
	}
	if _, err := ReadBody(strings.NewReader(strings.Repeat("x", 11)), -1, 10, end); !errors.As(err, &e) || e.Status != 413 ||
		len(ended) != 1 || ended[0] == nil {
		t.Fatalf("undeclared over the limit: %v, ended %v", err, ended)
	}
	b, err := ReadBody(strings.NewReader(strings.Repeat("x", 10)), 10, 10, end)
	if err != nil || len(b) != 10 || len(ended) != 2 || ended[1] != nil {
		t.Fatalf("exactly the limit: %d bytes, %v, ended %v", len(b), err, ended)
	}
	if _, err := ReadBody(strings.NewReader("{}"), -1, 10, nil); err != nil {
		t.Fatalf("no end hook: %v", err)
	}
}

// BodyError maps a body's failures to their answers: 413, 408, 503
// body_budget, an *Error as it is, anything else 400.
func TestBodyError(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{&http.MaxBytesError{Limit: 5}, 413, "body_too_large"},
		{errBodyTimeout, 408, "request_timeout"},
		{errBodyBudget, 503, "body_budget"},
		{&Error{Status: 500, Code: "x"}, 500, "x"},
		{io.ErrUnexpectedEOF, 400, "invalid_request"},
	} {
		var e *Error
		if err := BodyError("reading", c.err); !errors.As(err, &e) || e.Status != c.status || e.Code != c.code {
			t.Errorf("%v: %v, want %d %s", c.err, err, c.status, c.code)
		}
	}
}

// BodyOf without LimitBody has the 1 MiB defaults and no connection to
// tell; through LimitBody it has the configured limits.
func TestBodyOf(t *testing.T) {
	r := httptest.NewRequest("POST", "/", nil)
	if b := BodyOf(r.Context()); b.MaxJSON != 1<<20 || b.SpoolThreshold != 1<<20 || b.conn != nil {
		t.Fatalf("defaults: %+v", b)
	}
	BodyOf(r.Context()).End(nil) // no connection: nothing to do
	e := testEdge(t, Config{MaxJSONBody: 7, SpoolThreshold: 9, SpoolDir: "/spool"})
	var got Body
	e.LimitBody(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = BodyOf(r.Context()) })).
		ServeHTTP(httptest.NewRecorder(), r)
	if got.MaxJSON != 7 || got.SpoolThreshold != 9 || got.SpoolDir != "/spool" {
		t.Fatalf("through LimitBody: %+v", got)
	}
}

// LimitBody refuses before reading: a declared length over --max-body is
// 413, one over the memory or spool budget 503 body_budget; a refusal
// for the spool budget gives the memory it took back, and a body served
// gives everything back when its handler returns (edge.body-budget;
// edgemutants budget-refusal-leaks-mem).
func TestLimitBodyReservations(t *testing.T) {
	e := testEdge(t, Config{MaxBody: 100, SpoolThreshold: 10, BodyBudget: 10, SpoolBudget: 20})
	var inHandler [2]int64
	h := e.LimitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler[0], inHandler[1] = e.BodyBytes()
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	serve := func(n int) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/", bytes.NewReader(make([]byte, n))))
		return rec
	}
	for _, c := range []struct {
		n, status int
		code      string
	}{{101, 413, "body_too_large"}, {31, 503, "body_budget"}, {30, 200, ""}} {
		inHandler = [2]int64{}
		rec := serve(c.n)
		if rec.Code != c.status || rec.Body.String() != c.code {
			t.Errorf("%d bytes: %d %s, want %d %s", c.n, rec.Code, rec.Body, c.status, c.code)
		}
		if mem, disk := e.BodyBytes(); mem != 0 || disk != 0 {
			t.Fatalf("%d bytes: %d in memory and %d on disk still reserved", c.n, mem, disk)
		}
	}
	if inHandler != [2]int64{10, 20} {
		t.Fatalf("a 30-byte body held %v (memory, disk) in its handler, want [10 20]", inHandler)
	}
	// The memory budget taken by another body: a refusal for memory
	// reserves nothing on disk.
	if !e.limits.mem.take(5) {
		t.Fatal("take")
	}
	if rec := serve(8); rec.Code != 503 {
		t.Fatalf("over the memory left: %d", rec.Code)
	}
	if mem, disk := e.BodyBytes(); mem != 5 || disk != 0 {
		t.Fatalf("after the refusal: %d in memory, %d on disk, want 5 and 0", mem, disk)
	}
}

// Spool keeps up to the threshold in memory, spools a longer payload to
// a file that Close removes (twice is fine), and leaves nothing behind
// when the payload's reading fails (edge.upload-spool).
func TestSpool(t *testing.T) {
	dir := t.TempDir()
	s, err := Spool(strings.NewReader("abc"), 3, dir)
	if err != nil || string(s.Data) != "abc" || s.Blob().Size() != 3 {
		t.Fatalf("in memory: %+v %v", s, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Spool(strings.NewReader("abcd"), 3, dir)
	if err != nil || s.Data != nil {
		t.Fatalf("spooled: %+v %v", s, err)
	}
	b := s.Blob()
	tail := make([]byte, 2)
	if _, err := b.ReadAt(tail, 2); err != nil || string(tail) != "cd" || b.Size() != 4 {
		t.Fatalf("the spool file: %q %v, size %d", tail, err, b.Size())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d spool files, want 1", len(ents))
	}
	if err := errors.Join(s.Close(), s.Close()); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("spool files left after Close: %v", ents)
	}
	broken := io.MultiReader(strings.NewReader("abcdef"), iotest{err: io.ErrUnexpectedEOF})
	if _, err := Spool(broken, 3, dir); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a failed read: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("spool files left after a failed read: %v", ents)
	}
}

// iotest is a reader that fails with err.
type iotest struct{ err error }

func (r iotest) Read([]byte) (int, error) { return 0, r.err }
