package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
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
	var server *trackedConn
	ts.awaitConns("the connection", anyConn(func(sc *trackedConn) bool {
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

// The write deadline and the shutdown slice loop compose: the earlier
// deadline wins, and a deadline a handler sets is kept beside the piece's.
func TestWriteDeadlinesCompose(t *testing.T) {
	tr := newConnTracker()
	tr.writeTimeout = time.Hour
	c := &trackedConn{Conn: nopConn{}, t: tr}
	now := time.Now()
	c.pieceWrite = now.Add(time.Hour)
	if err := c.SetWriteDeadline(now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.sliceWrite = now.Add(time.Second)
	if got := earliest(c.appWrite, c.pieceWrite, c.sliceWrite); !got.Equal(now.Add(time.Second)) {
		t.Fatalf("earliest = %v", got)
	}
	if got := earliest(time.Time{}, time.Time{}); !got.IsZero() {
		t.Fatalf("no deadline became %v", got)
	}
}

type nopConn struct{ net.Conn }

func (nopConn) SetReadDeadline(time.Time) error  { return nil }
func (nopConn) SetWriteDeadline(time.Time) error { return nil }

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
	for _, c := range ts.s.conns.snapshot() {
		c.mu.Lock()
		app, slice := c.appRead, c.readDeadline
		c.mu.Unlock()
		if in, _ := c.phase(); in && (!app.IsZero() || slice) {
			t.Fatalf("read deadline %v (slice %v) left after the body", app, slice)
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
		ts.awaitConns(fmt.Sprintf("%d connections", i+1), func(cs []*trackedConn) bool { return len(cs) == i+1 })
	}
	ts.must(http.StatusOK, "GET", "/healthz", "")
	expectClosed(t, slow[0])
	if n := ts.s.conns.open.Load(); n > 4 {
		t.Fatalf("%d connections open past the limit of 4", n)
	}
	if n := ts.s.conns.evicted.Load(); n != 1 {
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
	ts.awaitConns("no connection", func(cs []*trackedConn) bool { return len(cs) == 0 })
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

// ReadHeaderTimeout closes a connection that sends its header too slowly.
func TestSlowHeaderClosed(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ReadHeaderTimeout = 100 * time.Millisecond })
	c := ts.rawConn()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-"); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
}

// blobEngine is an engine that records what each request's payload looked
// like while it ran: the Blob's type and size, Data, Input and the files in
// the spool folder.
type blobEngine struct {
	dir  string
	mu   sync.Mutex
	seen []blobSeen
}

type blobSeen struct {
	file  bool // the Blob is a spool file
	size  int64
	data  int
	input string
	files int
	tail  string
}

func (e *blobEngine) Name() string                            { return "blobcheck" }
func (e *blobEngine) Validate(backends.Spec) error            { return nil }
func (e *blobEngine) EstimateMB(backends.Spec) (int64, error) { return 0, nil }
func (e *blobEngine) Probe(context.Context, backends.Spec) (int, error) {
	return 1, nil
}
func (e *blobEngine) Open(context.Context, backends.Spec) (backends.Session, int, error) {
	return blobSession{e}, 1, nil
}

type blobSession struct{ e *blobEngine }

func (s blobSession) Clone(context.Context, int) (backends.Session, error) { return s, nil }
func (s blobSession) Close(context.Context) error                          { return nil }
func (s blobSession) Infer(_ context.Context, req backends.Request, _ backends.Emit) (backends.Output, error) {
	var v blobSeen
	if req.Body != nil {
		_, v.file = req.Body.(fileBlob)
		v.size = req.Body.Size()
		tail := make([]byte, min(8, v.size))
		if _, err := req.Body.ReadAt(tail, v.size-int64(len(tail))); err != nil {
			return backends.Output{}, err
		}
		v.tail = string(tail)
	}
	v.data, v.input = len(req.Data), string(req.Input)
	ents, err := os.ReadDir(s.e.dir)
	if err != nil {
		return backends.Output{}, err
	}
	v.files = len(ents)
	s.e.mu.Lock()
	s.e.seen = append(s.e.seen, v)
	s.e.mu.Unlock()
	return backends.Output{JSON: json.RawMessage(`{"text":"ok","duration":1}`)}, nil
}

func (e *blobEngine) last(t *testing.T) blobSeen {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		t.Fatal("the engine saw no request")
	}
	return e.seen[len(e.seen)-1]
}

// startBlobServer serves a blobcheck ASR model "asr" with the spool in a
// private folder.
func startBlobServer(t *testing.T, mutate func(*Config)) (*tserver, *blobEngine) {
	t.Helper()
	eng := &blobEngine{dir: t.TempDir()}
	cfg := testConfig(t)
	cfg.SpoolDir = eng.dir
	cfg.MaxBody = 32 << 20
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &logBuffer{}
	s, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Engines: backends.Registry{eng.Name(): eng}, CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := &tserver{t: t, s: s, logs: logs, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(ts.close)
	ts.serve()
	ts.put("asr", `{"engine":"blobcheck","task":"asr"}`)
	return ts, eng
}

// multipartUpload builds a transcription form with the file part's
// Content-Type ctype.
func multipartUpload(t *testing.T, payload []byte, ctype string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("model", "asr")
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="a.wav"`)
	h.Set("Content-Type", ctype)
	fw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(payload)
	_ = mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// edge.upload-spool: a 24 MiB upload reaches the engine as a spool file
// (no []byte of its size: Data is empty), one file in the spool folder
// while the request runs and none after; a small upload stays in memory.
func TestUploadSpooled(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	payload := bytes.Repeat([]byte("0123456789abcdef"), (24<<20)/16)
	copy(payload[len(payload)-8:], "THE-END!")
	ctype, body := multipartUpload(t, payload, "audio/wav")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	v := eng.last(t)
	if !v.file || v.size != int64(len(payload)) || v.data != 0 || v.files != 1 || v.tail != "THE-END!" {
		t.Fatalf("the engine saw %+v", v)
	}
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
	// The raw-body form spools too.
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions?model=asr", string(payload), "Content-Type", "audio/wav")
	if v := eng.last(t); !v.file || v.size != int64(len(payload)) || v.data != 0 || v.files != 1 {
		t.Fatalf("the engine saw %+v", v)
	}
	// A small upload stays in memory.
	small := []byte("RIFF-small-payload")
	ctype, body = multipartUpload(t, small, "audio/wav")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	if v := eng.last(t); v.file || v.size != int64(len(small)) || v.data != len(small) || v.files != 0 {
		t.Fatalf("the engine saw %+v", v)
	}
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
}

// A request that fails after its upload was spooled (an unknown model)
// leaves no spool file behind.
func TestUploadSpoolRemovedOnError(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	payload := bytes.Repeat([]byte{1}, 2<<20)
	ts.must(http.StatusNotFound, "POST", "/v1/audio/transcriptions?model=nope", string(payload), "Content-Type", "audio/wav")
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
}

// edge.upload-l16: audio/L16;rate=N (raw body or the file part) is raw PCM
// at N Hz: the engine input says so; a bad rate is 400; other types pass
// as they are.
func TestUploadDeclaredL16(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	pcm := make([]byte, 320)
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions?model=asr", string(pcm), "Content-Type", "audio/L16; rate=8000")
	if v := eng.last(t); v.input != `{"sample_rate":8000}` {
		t.Fatalf("input %q", v.input)
	}
	ctype, body := multipartUpload(t, pcm, "audio/L16;rate=22050;channels=1")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	if v := eng.last(t); v.input != `{"sample_rate":22050}` {
		t.Fatalf("input %q", v.input)
	}
	ctype, body = multipartUpload(t, pcm, "audio/wav")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", string(body), "Content-Type", ctype)
	if v := eng.last(t); v.input != "" {
		t.Fatalf("input %q for a WAV", v.input)
	}
	for _, bad := range []string{"audio/L16", "audio/L16; rate=12", "audio/L16; rate=16000; channels=2"} {
		r := ts.must(http.StatusBadRequest, "POST", "/v1/audio/transcriptions?model=asr", string(pcm), "Content-Type", bad)
		if r.errType(t) != "invalid_request_error" {
			t.Fatalf("%s: %s", bad, r.body)
		}
	}
}

// edge.body-budget: a declared body that does not fit the server-wide
// budget is refused at once with 503 server_busy and Retry-After, without
// reading it; once the body in flight is done, the next one fits.
func TestBodyBudgetRefuses(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		stalledConfig(c)
		c.BodyBudget, c.SpoolThreshold, c.SpoolBudget = 64<<10, 64<<10, 64<<10
	})
	ts.put("a", `{"engine":"fixture"}`)
	body := `{"input":{"pad":"` + strings.Repeat("x", 40<<10) + `"}}`
	first := ts.rawConn()
	if _, err := fmt.Fprintf(first, "POST /v1/models/a/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	// The first request's reservation is made after its handler starts:
	// wait for the reservation itself, not the phase.
	ts.awaitConns("the first body's reservation", func([]*trackedConn) bool {
		return ts.s.limits.mem.inUse() >= int64(len(body))
	})
	second := ts.rawConn()
	if _, err := fmt.Fprintf(second, "POST /v1/models/a/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	res := readAnswer(t, second)
	if res.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", res.Header.Get("Retry-After"))
	}
	requireErr(t, res, http.StatusServiceUnavailable, "server_busy", "body_budget")
	if _, err := io.WriteString(first, body); err != nil {
		t.Fatal(err)
	}
	_ = first.SetReadDeadline(time.Now().Add(waitLimit))
	res, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	// The fixture refuses the unknown input field; what matters is that
	// the body was read and the reservation given back.
	if res.StatusCode == http.StatusServiceUnavailable {
		t.Fatalf("the first request: %d", res.StatusCode)
	}
	ts.awaitNothingReserved()
	ts.must(http.StatusOK, "POST", "/v1/models/a/infer", `{"input":{}}`)
}

// edge.json-limit: a JSON body over --max-json-body is 413, declared or
// not.
func TestJSONBodyLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxJSONBody = 1 << 10 })
	ts.put("a", `{"engine":"fixture"}`)
	big := `{"input":{"text":"` + strings.Repeat("x", 2<<10) + `"}}`
	r := ts.must(http.StatusRequestEntityTooLarge, "POST", "/v1/models/a/infer", big)
	if r.errType(t) != "invalid_request_error" {
		t.Fatalf("%s", r.body)
	}
	req, _ := http.NewRequest("POST", ts.url+"/v1/models/a/infer", io.MultiReader(strings.NewReader(big))) // chunked: no declared length
	req.Header.Set("Content-Type", "application/json")
	res, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d", res.StatusCode)
	}
}

// edge.body-budget, chunked: a body of unknown length is charged as it
// arrives and refused (503 body_budget) once it outgrows the budgets.
func TestBodyBudgetChunked(t *testing.T) {
	ts, eng := startBlobServer(t, func(c *Config) { c.BodyBudget, c.SpoolThreshold, c.SpoolBudget = 1<<10, 1<<10, 4<<10 })
	req, err := http.NewRequest("POST", ts.url+"/v1/audio/transcriptions?model=asr",
		io.MultiReader(bytes.NewReader(make([]byte, 16<<10)))) // no declared length: chunked
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "audio/wav")
	res, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	requireErr(t, res, http.StatusServiceUnavailable, "server_busy", "body_budget")
	_ = res.Body.Close()
	ts.awaitNothingReserved()
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
	// Within the budgets it is served.
	req, _ = http.NewRequest("POST", ts.url+"/v1/audio/transcriptions?model=asr", io.MultiReader(bytes.NewReader(make([]byte, 3<<10))))
	req.Header.Set("Content-Type", "audio/wav")
	if res, err = ts.client.Do(req); err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("within the budget: %d", res.StatusCode)
	}
}

// The automatic connection limit leaves headroom under RLIMIT_NOFILE and
// never goes below its floor; Config.MaxConns 0 means it.
func TestAutoMaxConns(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{1024, 960}, {50, minAutoConns}, {0, 960}, {1 << 20, 1<<20 - fdHeadroom}} {
		if got := autoMaxConns(c.nofile); got != c.want {
			t.Errorf("autoMaxConns(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
	ts := newServer(t, nil)
	if got, want := ts.s.conns.maxConns, autoMaxConns(fileLimit()); got != want {
		t.Fatalf("maxConns %d, want %d", got, want)
	}
	ts = newServer(t, func(c *Config) { c.MaxConns = -1 })
	if ts.s.conns.maxConns > 0 {
		t.Fatalf("negative --max-conns should disable the limit, got %d", ts.s.conns.maxConns)
	}
}

// awaitNothingReserved waits until no handler runs, then checks that the
// body budgets are whole again (edge.body-budget).
func (ts *tserver) awaitNothingReserved() {
	ts.t.Helper()
	ts.awaitConns("no handler running", func(cs []*trackedConn) bool {
		for _, c := range cs {
			if in, _ := c.phase(); in {
				return false
			}
		}
		return true
	})
	if n := ts.s.limits.mem.inUse() + ts.s.limits.disk.inUse(); n != 0 {
		ts.t.Fatalf("%d bytes still reserved", n)
	}
}
