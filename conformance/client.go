package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// answer is one finished HTTP exchange as a case sees it.
type answer struct {
	path   string // the request's path: /v2 answers have the inference protocol's error shape
	head   bool   // a HEAD request: the answer has no body to check
	status int
	header http.Header
	body   []byte
	// events are the data payloads of a text/event-stream answer, [DONE]
	// excluded; done says it ended with [DONE], errorEvent that it carried
	// an `event: error`.
	events     []string
	done       bool
	errorEvent bool

	err          error // transport failure (no complete answer)
	disconnected bool  // the case disconnected the call
	sent, got    time.Time
}

// summary describes an answer in one line for failure messages.
func (a *answer) summary() string {
	switch {
	case a.disconnected:
		return "disconnected by the client"
	case a.err != nil:
		return "transport error: " + a.err.Error()
	}
	b := strings.TrimSpace(string(a.body))
	if len(b) > 300 {
		b = b[:300] + "..."
	}
	if len(a.events) > 0 || a.done {
		return fmt.Sprintf("%d stream: %d events, done=%v, error event=%v", a.status, len(a.events), a.done, a.errorEvent)
	}
	return fmt.Sprintf("%d %s", a.status, b)
}

// call is an asynchronous exchange started by a step with `as`.
type call struct {
	name    string
	cancel  context.CancelFunc
	done    chan struct{}
	ans     answer // valid once done is closed
	chunks  atomic.Int64
	awaited bool
}

// finished reports whether the call has its answer.
func (c *call) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// request is what a step sends.
type request struct {
	method string
	path   string
	body   []byte
	header map[string][]string // each value a header line
	// chunked sends body with no Content-Length (a body of unknown length).
	chunked bool
	// first > 0 sends body's first bytes at once and the rest after pause.
	first int
	pause time.Duration
}

// pausedReader is a body whose first bytes are read at once and the rest
// only after a pause (a slow client); it gives up when ctx ends.
type pausedReader struct {
	ctx   context.Context
	b     []byte
	first int
	pause time.Duration
	off   int
}

func (p *pausedReader) Read(b []byte) (int, error) {
	if p.off >= len(p.b) {
		return 0, io.EOF
	}
	if p.off == p.first {
		t := time.NewTimer(p.pause)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return 0, p.ctx.Err()
		}
	}
	end := len(p.b)
	if p.off < p.first {
		end = p.first
	}
	n := copy(b, p.b[p.off:end])
	p.off += n
	return n, nil
}

// setHeaders sets a step's headers on hr; a Host header replaces the
// request's Host (net/http ignores it in the header map), so cases can
// send a rebinding page's Host (CONTRACT.md err.host).
func setHeaders(hr *http.Request, req request) {
	for k, vs := range req.header {
		if strings.EqualFold(k, "Host") && len(vs) > 0 {
			hr.Host = vs[0] // a Host header replaces the request's Host
			continue
		}
		hr.Header.Del(k)
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
}

// exchange performs req against base with client, reading the whole answer
// (a stream event by event, counting chunks on c when set).
func exchange(ctx context.Context, client *http.Client, base string, req request, c *call) answer {
	a := answer{path: req.path, head: req.method == http.MethodHead}
	a.sent = time.Now()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	switch {
	case req.chunked && body != nil:
		body = struct{ io.Reader }{body} // no length known to net/http: sent chunked
	case req.first > 0 && req.first < len(req.body):
		body = &pausedReader{ctx: ctx, b: req.body, first: req.first, pause: req.pause}
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, base+req.path, body)
	if err != nil {
		a.err, a.got = err, time.Now()
		return a
	}
	if _, ok := body.(*pausedReader); ok {
		hr.ContentLength = int64(len(req.body)) // declared, as a client that knows its body's size
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	setHeaders(hr, req)
	resp, err := client.Do(hr)
	if err != nil {
		a.err, a.got = err, time.Now()
		return a
	}
	defer resp.Body.Close()
	a.status, a.header = resp.StatusCode, resp.Header
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		a.err = readEvents(resp.Body, &a, c)
	} else {
		a.body, a.err = io.ReadAll(resp.Body)
	}
	a.got = time.Now()
	return a
}

// readEvents reads a text/event-stream answer.
func readEvents(r io.Reader, a *answer, c *call) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			event = ""
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			if event == "error" {
				a.errorEvent = true
			}
		case strings.HasPrefix(line, "data:"):
			data := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			switch {
			case event == "error":
				a.body = []byte(data)
			case data == "[DONE]":
				a.done = true
			default:
				a.events = append(a.events, data)
				if c != nil {
					c.chunks.Add(1)
				}
			}
		}
	}
	return sc.Err()
}

// exchangeHandler sends req straight to an in-process handler.
func exchangeHandler(ctx context.Context, h http.Handler, req request) answer {
	a := answer{path: req.path, head: req.method == http.MethodHead}
	a.sent = time.Now()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr := httptest.NewRequestWithContext(ctx, req.method, req.path, body)
	hr.Host = "127.0.0.1" // as over loopback; httptest's example.com is not an allowed host (err.host)
	if req.chunked && body != nil {
		hr.ContentLength = -1
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	setHeaders(hr, req)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, hr)
	res := rec.Result()
	a.status, a.header = res.StatusCode, res.Header
	b, _ := io.ReadAll(res.Body)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		a.err = readEvents(bytes.NewReader(b), &a, nil)
	} else {
		a.body = b
	}
	a.got = time.Now()
	return a
}

// stallExchange opens a connection that stalls (StallStep) and returns
// what became of it: the server's answer, or the error of the read that
// saw the server close the connection. It reports on started once the
// stall has begun: for "idle", once its two keep-alive answers were read
// in full, or why they were not.
func stallExchange(ctx context.Context, base, kind, path string, body []byte, started chan<- error) answer {
	var a answer
	u, err := url.Parse(base)
	if err != nil {
		a.err = err
		started <- err
		return a
	}
	var d net.Dialer
	if kind == "unread" {
		// A small receive buffer before the connection exists, so that the
		// window the server sees stays small and its writes block.
		d.Control = func(network, address string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = setRecvBuffer(fd, 4096) }); err != nil {
				return err
			}
			return serr
		}
	}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		a.err = err
		started <- err
		return a
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	var msg string
	switch kind {
	case "header":
		msg = fmt.Sprintf("GET /v1/models HTTP/1.1\r\nHost: %s\r\n", u.Host)
	case "body":
		msg = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"input\":", path, u.Host)
	case "unread":
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(1024)
		}
		msg = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, u.Host, len(body), body)
	case "idle":
		return idleExchange(conn, u.Host, started)
	default:
		err := fmt.Errorf("unknown stall kind %q (header, body, unread, idle)", kind)
		a.err = err
		started <- err
		return a
	}
	a.sent = time.Now()
	if _, err := io.WriteString(conn, msg); err != nil {
		a.err = err
		started <- err
		return a
	}
	started <- nil
	if kind == "unread" {
		// Never read: wait until the server gives up on the connection,
		// which a write of ours then notices, or the case ends.
		<-ctx.Done()
		a.err, a.got = errors.New("unread stream: case ended"), time.Now()
		return a
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		a.err, a.got = err, time.Now()
		return a
	}
	defer resp.Body.Close()
	a.status, a.header = resp.StatusCode, resp.Header
	a.body, a.err = io.ReadAll(resp.Body)
	a.got = time.Now()
	return a
}

// idleExchange is the "idle" stall on conn: two keep-alive requests sent
// at once (pipelined), both answered in full, then nothing sent until the
// server closes the connection (CONTRACT.md edge.idle-timeout). The second
// answer shows the connection outlived an answer whatever the scheduling;
// one that fails or announces Connection: close fails the step (started),
// since its close would be no idle close. The call's answer is the second
// probe's, with the read error that saw the close; bytes the server sends
// instead leave it without an error.
func idleExchange(conn net.Conn, host string, started chan<- error) answer {
	a := answer{path: "/healthz", sent: time.Now()}
	probe := fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	if _, err := io.WriteString(conn, probe+probe); err != nil {
		a.err = err
		started <- err
		return a
	}
	br := bufio.NewReader(conn)
	for i := 1; i <= 2; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			a.status, a.header = resp.StatusCode, resp.Header
			a.body, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		switch {
		case err != nil:
			a.err = err
			started <- fmt.Errorf("stall idle: answer %d of 2 to GET /healthz: %w", i, err)
			return a
		case resp.Close:
			err := fmt.Errorf("stall idle: answer %d of 2 to GET /healthz (%d) has Connection: close, want a kept-alive connection", i, resp.StatusCode)
			a.err = err
			started <- err
			return a
		}
	}
	started <- nil
	if b, err := br.ReadByte(); err != nil {
		a.err = fmt.Errorf("closed after the answer: %w", err)
	} else {
		a.body = fmt.Appendf(a.body, " (then %q unasked: no close)", b)
	}
	a.got = time.Now()
	return a
}

// decodeJSON decodes an answer's body (nil when it is not JSON).
func decodeJSON(b []byte) any {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil
	}
	return v
}
