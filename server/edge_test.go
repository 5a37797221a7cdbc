package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/edge"
)

// Tests of the serving edge (CONTRACT.md "Connections and request bodies",
// matrix edge). Timeouts here are small and observed, never slept for: a
// test waits for the server's answer or its records.

// asyncDo sends a request on its own goroutine; the answer's status (or
// the transport error) arrives on the channel.
func (ts *tserver) asyncDo(method, path, body string) <-chan asyncResp {
	ch := make(chan asyncResp, 1)
	go func() {
		req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
		if err != nil {
			ch <- asyncResp{err: err}
			return
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json") // CONTRACT.md err.content-type
		}
		res, err := ts.client.Do(req)
		if err != nil {
			ch <- asyncResp{err: err}
			return
		}
		b, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		ch <- asyncResp{status: res.StatusCode, body: b, err: err}
	}()
	return ch
}

type asyncResp struct {
	status int
	body   []byte
	err    error
}

func awaitResp(t *testing.T, what string, ch <-chan asyncResp) asyncResp {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r
	case <-time.After(waitLimit):
		t.Fatalf("%s: no answer within %v", what, waitLimit)
	}
	return asyncResp{}
}

// dialSmallBuffers dials the server with a 4 KiB receive buffer and gives
// the server's side of the connection a 4 KiB send buffer, so that a
// response the client does not read blocks the server's writes on any
// machine.
func (ts *tserver) dialSmallBuffers() net.Conn {
	ts.t.Helper()
	d := net.Dialer{Control: func(network, address string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", ts.addr)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { c.Close() })
	var server *edge.Conn
	ts.awaitConns("the connection", anyConn(func(sc *edge.Conn) bool {
		if sc.RemoteAddr().String() == c.LocalAddr().String() {
			server = sc
		}
		return server != nil
	}))
	if err := server.Conn.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		ts.t.Fatal(err)
	}
	return c
}

// edge.write-timeout: a stream whose client never reads is dropped after
// --write-timeout and its lease released; the unload queued behind it
// completes and a request queued behind the unload is served. Before the
// write deadline the stream held its slot until the socket closed.
func TestWriteTimeoutReleasesStalledStream(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.WriteTimeout = 200 * time.Millisecond })
	id := strings.Repeat("w", 128) // long IDs make long chunks: about 3 MB in all
	ts.put(id, `{"engine":"fixture"}`)
	c := ts.dialSmallBuffers()
	rec := ts.records()
	rawRequest(t, c, "POST", "/v1/models/"+id+"/infer", `{"input":{"chunks":10000},"stream":true}`)
	grant := rec.next("the stream's grant", func(r *core.Record) bool { return r.Ef == core.EfGrant.String() })
	granted := time.Now()
	unload := ts.asyncDo("POST", "/v1/models/"+id+"/unload", "")
	rec.next("the unload's submission", isEv(core.EvSubmitManager, id))
	later := ts.asyncDo("POST", "/v1/models/"+id+"/infer", `{"input":{}}`)
	rec.next("the later request's submission", isEv(core.EvSubmitRequest, id))
	rec.next("the stalled stream's release", isRelease(grant.Ticket))
	t.Logf("the stalled stream's slot freed %v after its grant (write timeout 200ms)", time.Since(granted).Round(time.Millisecond))
	if r := awaitResp(t, "the unload", unload); r.status != http.StatusOK {
		t.Fatalf("unload: %d %s", r.status, r.body)
	}
	if r := awaitResp(t, "the later request", later); r.status != http.StatusOK {
		t.Fatalf("later request: %d %s", r.status, r.body)
	}
	got := expectClosed(t, c)
	if strings.Contains(got, "[DONE]") {
		t.Fatal("the stalled stream completed")
	}
}

// readAnswer reads one HTTP answer from c and then requires that the server
// closed the connection.
func readAnswer(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	res.Body = io.NopCloser(bytes.NewReader(b))
	rest, err := io.ReadAll(br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || len(rest) > 0 {
		t.Fatalf("connection not closed after the answer: %q %v", rest, err)
	}
	return res
}

func requireErr(t *testing.T, res *http.Response, status int, typ, code string) {
	t.Helper()
	b, _ := io.ReadAll(res.Body)
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil || res.StatusCode != status || e.Error.Type != typ || e.Error.Code != code {
		t.Fatalf("answer %d %s, want %d %s/%s", res.StatusCode, b, status, typ, code)
	}
}

// edge.body-timeout, edge.body-min-rate: a body that stalls is answered
// 408 request_timeout and its connection closes, on a JSON endpoint and on
// an upload; with the rate rule alone the stall is caught once the grace
// has passed.
func TestSlowBodyGets408(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		path   string
		ctype  string
	}{
		{"min-rate/json", func(c *Config) {
			c.MinBodyRate, c.BodyRateGrace, c.BodyReadTimeout = 1<<20, 100*time.Millisecond, time.Hour
		},
			"/v1/models/a/infer", "application/json"},
		{"min-rate/upload", func(c *Config) {
			c.MinBodyRate, c.BodyRateGrace, c.BodyReadTimeout = 1<<20, 100*time.Millisecond, time.Hour
		},
			"/v1/audio/transcriptions?model=a", "audio/wav"},
		{"whole-body/json", func(c *Config) { c.MinBodyRate, c.BodyReadTimeout = 0, 150*time.Millisecond },
			"/v1/models/a/infer", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, func(c *Config) { stalledConfig(c); tc.mutate(c) })
			c := ts.rawConn()
			start := time.Now()
			if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: 1000\r\n\r\n{\"input\":", tc.path, tc.ctype); err != nil {
				t.Fatal(err)
			}
			res := readAnswer(t, c)
			t.Logf("answered after %v", time.Since(start).Round(time.Millisecond))
			requireErr(t, res, http.StatusRequestTimeout, "invalid_request_error", "request_timeout")
		})
	}
}

// After the body has been read no read deadline is left on the connection
// (net/http's background read would cancel the request's context).
func TestBodyDeadlineLiftedAfterBody(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MinBodyRate, c.BodyRateGrace = 1<<20, time.Second })
	ts.put("a", `{"engine":"fixture"}`)
	done := ts.asyncDo("POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`)
	ts.awaitGate("g", 1)
	for _, c := range ts.s.edge.Conns() {
		if in, _ := c.Phase(); in && c.ReadDeadlineHeld() {
			t.Fatal("a read deadline left after the body")
		}
	}
	ts.s.Fixture().Gates().Open("g")
	if r := awaitResp(t, "the request", done); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// edge.conn-limit: at --max-conns a new connection closes the oldest one
// that sends no request (here: stalled headers), so /healthz answers while
// the limit is saturated.
func TestConnLimitClosesOldestIdle(t *testing.T) {
	ts := startServer(t, func(c *Config) { stalledConfig(c); c.MaxConns = 4 })
	var slow []net.Conn
	for i := range 4 {
		c := ts.rawConn()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-"); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
		ts.awaitConns(fmt.Sprintf("%d connections", i+1), func(cs []*edge.Conn) bool { return len(cs) == i+1 })
	}
	ts.must(http.StatusOK, "GET", "/healthz", "")
	expectClosed(t, slow[0])
	if n := ts.s.edge.Open(); n > 4 {
		t.Fatalf("%d connections open past the limit of 4", n)
	}
	if n := ts.s.edge.Evicted(); n != 1 {
		t.Fatalf("%d connections closed for the limit, want 1", n)
	}
	text := ts.metricsText()
	for _, want := range []string{"sluice_http_connections_evicted_total 1\n", "sluice_http_max_connections 4\n",
		`sluice_http_body_budget_bytes{store="memory"} `, `sluice_http_body_bytes{store="disk"} 0`} {
		if !strings.Contains(text, want) {
			t.Fatalf("metrics lack %q:\n%s", want, text)
		}
	}
}

// edge.conn-limit, the probe reserve: when every connection at the limit runs a
// handler past its body, a new connection is still accepted, from a small
// reserve, but serves only /healthz and /readyz; other requests on it are
// 503 server_busy.
func TestConnLimitProbeReserve(t *testing.T) {
	ts := startServer(t, func(c *Config) { stalledConfig(c); c.MaxConns = 2 })
	ts.put("a", `{"engine":"fixture","slots":2}`)
	ts.client.CloseIdleConnections()
	ts.awaitConns("no connection", func(cs []*edge.Conn) bool { return len(cs) == 0 })
	var held []<-chan asyncResp
	for i := range 2 {
		held = append(held, ts.asyncDo("POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`))
		ts.awaitGate("g", i+1)
	}
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/v1/models"} {
		res, err := probe.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		if path == "/healthz" {
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("/healthz at the limit: %d %s", res.StatusCode, b)
			}
		} else {
			requireErr(t, res, http.StatusServiceUnavailable, "server_busy", "too_many_connections")
			if res.Header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		}
		_ = res.Body.Close()
	}
	ts.s.Fixture().Gates().Open("g")
	for _, h := range held {
		if r := awaitResp(t, "a held request", h); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
}

// ReadHeaderTimeout closes a connection that sends its header too slowly,
// its request unserved (CONTRACT.md edge.header-timeout): a header stalled
// mid-line gets net/http's plain 400 before the close.
func TestSlowHeaderClosed(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ReadHeaderTimeout = 100 * time.Millisecond })
	c := ts.rawConn()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-"); err != nil {
		t.Fatal(err)
	}
	if got := expectClosed(t, c); got != "" && !strings.HasPrefix(got, "HTTP/1.1 400 ") {
		t.Fatalf("a stalled header was answered: %q", got)
	}
}

// IdleConnTimeout closes a keep-alive connection that sends nothing after
// its last answer (CONTRACT.md edge.idle-timeout). Two requests are sent at
// once (pipelined) and both answered without Connection: close, so the
// connection was kept alive past an answer whatever the scheduling; the
// close that follows the second is the idle timeout's.
func TestIdleConnClosed(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.IdleConnTimeout = 100 * time.Millisecond })
	c := ts.rawConn()
	const req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	if _, err := io.WriteString(c, req+req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 2 {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		_, err = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Fatalf("answer %d: body: %v", i+1, err)
		}
		if res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("answer %d: %d, close %v: want 200 on a kept-alive connection", i+1, res.StatusCode, res.Close)
		}
	}
	if n := br.Buffered(); n != 0 {
		t.Fatalf("%d bytes after the second answer", n)
	}
	if got := expectClosed(t, c); got != "" {
		t.Fatalf("an idle connection got %q", got)
	}
}
