package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Shutdown tests (CONTRACT.md time.shutdown-*). Each stalled-I/O case holds
// a raw connection in its stalled state and asserts that Shutdown returns
// nil, that is, before its deadline: the stalled I/O was cancelled, not cut
// by the deadline. The timeouts that could otherwise free the connection
// (ReadHeaderTimeout) are set far beyond the shutdown deadline.

const shutdownBound = 5 * time.Second

func stalledConfig(c *Config) {
	c.ReadHeaderTimeout = time.Hour
	c.IdleConnTimeout = time.Hour
	c.ShutdownTimeout = shutdownBound
}

// shutdownWithin shuts ts down with the bound and requires that it drained.
func (ts *tserver) shutdownWithin(bound time.Duration) time.Duration {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	err := ts.s.Shutdown(ctx)
	took := time.Since(start)
	if err != nil {
		ts.t.Fatalf("shutdown did not drain within %v: %v", bound, err)
	}
	ts.t.Logf("shutdown took %v", took)
	return took
}

// expectClosed requires that the server closed c (EOF or reset) within
// waitLimit, after sending at most some bytes, which it returns.
func expectClosed(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", waitLimit)
	}
	return string(b)
}

func TestShutdownStalledHeader(t *testing.T) {
	ts := startServer(t, stalledConfig)
	c := ts.rawConn()
	if _, err := io.WriteString(c, "POST /v1/models/a/infer HTTP/1.1\r\nHost: x\r\nContent-"); err != nil {
		t.Fatal(err)
	}
	ts.awaitConns("one connection", func(cs []*edge.Conn) bool { return len(cs) == 1 })
	ts.shutdownWithin(shutdownBound)
	expectClosed(t, c)
}

func TestShutdownStalledBody(t *testing.T) {
	ts := startServer(t, stalledConfig)
	ts.put("a", `{"engine":"fixture"}`)
	c := ts.rawConn()
	if _, err := io.WriteString(c, "POST /v1/models/a/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"input\":"); err != nil {
		t.Fatal(err)
	}
	ts.awaitConns("a handler reading its body", anyConn(func(c *edge.Conn) bool {
		in, body := c.Phase()
		return in && body
	}))
	ts.shutdownWithin(shutdownBound)
	expectClosed(t, c)
	if m, _ := ts.s.Runtime().StatusOf("a"); m.ActiveSlots != 0 {
		t.Fatalf("%+v", m)
	}
}

// A client that does not read its response: a long stream to a client with
// a tiny receive buffer blocks the server's writes; shutdown cuts it within
// a slice, the stream's lease is released, and [DONE] never arrives.
func TestShutdownNonReadingClient(t *testing.T) {
	ts := startServer(t, stalledConfig)
	id := strings.Repeat("m", 128) // long IDs make long chunks: about 3 MB in all
	ts.put(id, `{"engine":"fixture"}`)
	c := ts.dialSmallBuffers()
	defer c.Close()
	// Small socket buffers on the server's side too, so that the stream
	// (about 3.5 MB) cannot fit into the kernel's buffers on any machine.
	var server *edge.Conn
	ts.awaitConns("the connection", anyConn(func(sc *edge.Conn) bool {
		if sc.RemoteAddr().String() == c.LocalAddr().String() {
			server = sc
		}
		return server != nil
	}))
	if err := server.Conn.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	rec := ts.records()
	rawRequest(t, c, "POST", "/v1/models/"+id+"/infer", `{"input":{"chunks":10000},"stream":true}`)
	grant := rec.next("the stream's grant", func(r *core.Record) bool { return r.Ef == core.EfGrant.String() })
	// The stream writes until the client's window and the server's send
	// buffer are full, then stalls: shutdown must cut it, whenever it began.
	ts.shutdownWithin(shutdownBound)
	rec.next("the stream's release", isRelease(grant.Ticket))
	got := expectClosed(t, c)
	t.Logf("the client received %d bytes before the cut", len(got))
	if strings.Contains(got, "[DONE]") {
		t.Fatal("the stalled stream completed")
	}
}

// A finite handler finishes during shutdown and its answer is written;
// the queued request is answered 503 shutting_down at once; /readyz is 503
// from the start; new submissions are shutting_down (CONTRACT.md
// time.shutdown-active-handler, time.shutdown-queued,
// time.shutdown-new-submission).
func TestShutdownLetsFiniteHandlersFinish(t *testing.T) {
	ts := startServer(t, stalledConfig)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	rec := ts.records()
	var wg sync.WaitGroup
	defer wg.Wait()
	var running, queued resp
	wg.Go(func() { running = ts.do("POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`) })
	ts.awaitGate("g", 1)
	wg.Go(func() { queued = ts.do("POST", "/v1/models/a/infer", `{"input":1}`) })
	rec.next("the queued request", isEv(core.EvSubmitRequest, "a"))
	rec.next("the queued request", isEv(core.EvSubmitRequest, "a")) // the first record was the running one's
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownBound)
		defer cancel()
		shut <- ts.s.Shutdown(ctx)
	}()
	rec.next("the queued request's rejection", func(r *core.Record) bool {
		return r.Ef == core.EfReject.String() && r.Code == core.CodeShuttingDown.String()
	})
	if r := (&tserver{t: t, s: ts.s}).do("GET", "/readyz", ""); r.status != 503 || r.errType(t) != "shutting_down" {
		t.Fatalf("readyz during shutdown: %d %s", r.status, r.body)
	}
	if r := (&tserver{t: t, s: ts.s}).do("POST", "/v1/models/a/infer", `{"input":1}`); r.status != 503 || r.errType(t) != "shutting_down" {
		t.Fatalf("new submission during shutdown: %d %s", r.status, r.body)
	}
	if r := (&tserver{t: t, s: ts.s}).do("PUT", "/v1/models/a", `{"engine":"fixture","slots":0}`); r.status != 400 {
		t.Fatalf("an invalid spec is 400 first: %d %s", r.status, r.body)
	}
	select {
	case err := <-shut:
		t.Fatalf("shutdown returned while a handler ran: %v", err)
	default:
	}
	ts.s.Fixture().Gates().Open("g")
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if running.status != 200 {
		t.Fatalf("running request: %d %s", running.status, running.body)
	}
	if queued.status != 503 || queued.errType(t) != "shutting_down" {
		t.Fatalf("queued request: %d %s", queued.status, queued.body)
	}
}

// CONTRACT.md time.shutdown-hung-engine and time.shutdown-deadline: an
// engine step that never returns by itself is cancelled at the deadline,
// and Shutdown reports that it had to cut.
func TestShutdownDeadline(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { // the request is cut: answered with an error, or its connection closed
		if res, err := ts.client.Post(ts.url+"/v1/models/a/infer", "application/json", strings.NewReader(`{"input":{"gate":"never"}}`)); err == nil {
			res.Body.Close()
		}
	})
	ts.awaitGate("never", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ts.deadlineExpected = true
	if err := ts.s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown past its deadline: %v", err)
	}
	wg.Wait()
}

// CONTRACT.md time.shutdown-stuck-native: past the deadline a request whose
// engine call ignores the cancellation is still there, and LogStuckWork
// names it (model, slot, request ID, time held) with the open connection;
// `sluice serve` logs that and exits without it. Here the gate then opens,
// so the stuck call ends and the server shuts down cleanly.
func TestLogStuckWorkNamesStuckRequests(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/models/a/infer", strings.NewReader(`{"input":{"stuck":true,"gate":"held"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(httpapi.RequestIDHeader, "stuck-7")
		if res, err := ts.client.Do(req); err == nil {
			res.Body.Close()
		}
	})
	ts.awaitGate("held", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- ts.s.Shutdown(ctx) }()
	<-ctx.Done()
	// The deadline cancelled backend work, but the stuck call goes on.
	if n := ts.s.Fixture().Gates().Waiting("held"); n != 1 {
		t.Fatalf("the stuck call left its gate: %d waiting", n)
	}
	if n := ts.s.LogStuckWork(); n != 1 {
		t.Fatalf("LogStuckWork named %d pieces of work: %+v", n, ts.s.StuckWork())
	}
	logs := ts.logs.String()
	for _, want := range []string{`msg="shutdown gave up on work that ignores cancellation" model=a kind=request running=`,
		"slot=0 request_id=stuck-7", `msg="exiting with work still running" stuck=1 open_connections=1`} {
		if !strings.Contains(logs, want) {
			t.Fatalf("log lacks %q:\n%s", want, logs)
		}
	}
	ts.s.Fixture().Gates().Open("held")
	ts.deadlineExpected = true
	if err := <-shut; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown past its deadline: %v", err)
	}
}
