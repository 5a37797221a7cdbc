package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/edge"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitLimit bounds every wait of a test for an event that must come; it is a
// safety net against hangs, never a timing assertion.
const waitLimit = 20 * time.Second

// logBuffer collects a server's logs for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		os.Stderr.Write(p)
	}
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testConfig is the configuration of most tests: the parallel runtime with
// management and the fixture, a private models root.
func testConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.ParallelJobs, cfg.UIManagement, cfg.Fixture = true, true, true
	cfg.ModelsRoot = t.TempDir()
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// tserver is one server under test. Without serve it is used through its
// handler (httptest); with serve it listens on 127.0.0.1, port 0.
type tserver struct {
	t      *testing.T
	s      *Server
	logs   *logBuffer
	url    string
	addr   string
	client *http.Client
	served chan error

	deadlineExpected bool // the test ends the server past its shutdown deadline
}

// newServer builds a server from testConfig changed by mutate; it is shut
// down, and checked, when the test ends.
func newServer(t *testing.T, mutate func(*Config)) *tserver {
	t.Helper()
	cfg := testConfig(t)
	if mutate != nil {
		mutate(&cfg)
	}
	return newServerCfg(t, cfg)
}

// newServerCfg builds a server from cfg as it is; it is shut down, and
// checked, when the test ends.
func newServerCfg(t *testing.T, cfg Config) *tserver {
	t.Helper()
	return newServerOpts(t, cfg, Options{})
}

// newServerOpts builds a server from cfg and opts, with the test's logger
// and the invariant checks; it is shut down, and checked, when the test
// ends.
func newServerOpts(t *testing.T, cfg Config, opts Options) *tserver {
	t.Helper()
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.CheckInvariants = true
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := &tserver{t: t, s: s, logs: logs, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(ts.close)
	return ts
}

// startEngineServer is startServer over a models root that holds the
// default checkpoints names, with the real engines beside the fixture.
func startEngineServer(t *testing.T, mutate func(*Config), names ...string) *tserver {
	t.Helper()
	cfg := testConfig(t)
	if err := engines.BuildDefaultRoot(cfg.ModelsRoot, "", names...); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return newServerOpts(t, cfg, Options{Engines: engines.Registry(engines.Config{})}).serve()
}

// serve starts listening on loopback.
func (ts *tserver) serve() *tserver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	ts.url = "http://" + ts.addr
	ts.served = make(chan error, 1)
	go func() { ts.served <- ts.s.Serve(ln) }()
	return ts
}

// startServer is newServer(...).serve().
func startServer(t *testing.T, mutate func(*Config)) *tserver {
	return newServer(t, mutate).serve()
}

func (ts *tserver) close() {
	ts.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ts.s.Shutdown(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * waitLimit):
		// A lease never released (a bug, or a test that failed holding
		// one) keeps the runtime's shutdown waiting for good, by design:
		// the test fails here instead of hanging until go test's limit.
		ts.t.Errorf("shutdown did not return within %v: a lease or an engine call never ended", 2*waitLimit)
		return
	}
	if err != nil && !ts.t.Failed() && !ts.deadlineExpected {
		ts.t.Errorf("shutdown: %v", err)
	}
	if ts.served != nil {
		if err := <-ts.served; err != nil {
			ts.t.Errorf("serve: %v", err)
		}
	}
	if fx := ts.s.Fixture(); fx != nil {
		if n := fx.OpenSessions(); n != 0 {
			ts.t.Errorf("%d fixture sessions left open after shutdown", n)
		}
		if v := fx.Violations(); len(v) > 0 {
			ts.t.Errorf("fixture session rules broken: %v", v)
		}
	}
}

// resp is a finished HTTP exchange.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// errType returns the error type of an error answer, checking its shape.
func (r resp) errType(t *testing.T) string {
	t.Helper()
	var e map[string]map[string]any
	r.json(t, &e)
	inner, ok := e["error"]
	if !ok || len(e) != 1 {
		t.Fatalf("not an error shape: %s", r.body)
	}
	for _, k := range []string{"message", "type", "code"} {
		if _, ok := inner[k]; !ok {
			t.Fatalf("error without %q: %s", k, r.body)
		}
	}
	return inner["type"].(string)
}

// do sends a request: over loopback when the server listens, else through
// its handler with httptest.
func (ts *tserver) do(method, path, body string, hdr ...string) resp {
	ts.t.Helper()
	return ts.doCtx(context.Background(), method, path, body, hdr...)
}

func (ts *tserver) doCtx(ctx context.Context, method, path, body string, hdr ...string) resp {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	if ts.url == "" {
		req := httptest.NewRequestWithContext(ctx, method, path, rd)
		req.Host = "127.0.0.1" // httptest's example.com is not an allowed host (CONTRACT.md err.host)
		if body != "" || method != "GET" {
			req.Header.Set("Content-Type", "application/json") // JSON routes require it (err.content-type)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		ts.s.Handler().ServeHTTP(rec, req)
		return resp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if body != "" || method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: reading: %v", method, path, err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// must sends a request and requires status want.
func (ts *tserver) must(want int, method, path, body string, hdr ...string) resp {
	ts.t.Helper()
	r := ts.do(method, path, body, hdr...)
	if r.status != want {
		ts.t.Fatalf("%s %s %s: status %d, want %d: %s", method, path, body, r.status, want, r.body)
	}
	return r
}

// put registers a model.
func (ts *tserver) put(id, spec string) Model {
	ts.t.Helper()
	var m Model
	ts.must(200, "PUT", "/v1/models/"+id, spec).json(ts.t, &m)
	return m
}

// model returns a model's status through GET /v1/models/{id}.
func (ts *tserver) model(id string) Model {
	ts.t.Helper()
	var m Model
	ts.must(200, "GET", "/v1/models/"+id, "").json(ts.t, &m)
	return m
}

func ctxLimit(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// awaitGate waits until n steps wait at the fixture gate name.
func (ts *tserver) awaitGate(name string, n int) {
	ts.t.Helper()
	if err := ts.s.Fixture().Gates().AwaitWaiting(ctxLimit(ts.t), name, n); err != nil {
		ts.t.Fatalf("gate %s: %v\n%s", name, err, ts.s.Runtime().Describe())
	}
}

// records subscribes to the scheduler's records for the rest of the test.
func (ts *tserver) records() *recorder {
	ch, cancel := ts.s.Runtime().Subscribe(1 << 12)
	ts.t.Cleanup(cancel)
	return &recorder{t: ts.t, ch: ch}
}

// recorder reads scheduler records in order.
type recorder struct {
	t  *testing.T
	ch <-chan core.Record
}

// next returns the first record from now on that matches, failing the test
// after waitLimit.
func (r *recorder) next(what string, match func(*core.Record) bool) core.Record {
	r.t.Helper()
	return r.nextWithin(what, waitLimit, match)
}

func (r *recorder) nextWithin(what string, d time.Duration, match func(*core.Record) bool) core.Record {
	r.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case rec, ok := <-r.ch:
			if !ok {
				r.t.Fatalf("record subscription dropped while waiting for %s", what)
			}
			if match(&rec) {
				return rec
			}
		case <-timer.C:
			r.t.Fatalf("no %s within %v", what, d)
		}
	}
}

func isEv(kind core.EventKind, model string) func(*core.Record) bool {
	return func(r *core.Record) bool { return r.Ev == kind.String() && (model == "" || r.Model == model) }
}

func isRelease(tk uint64) func(*core.Record) bool {
	return func(r *core.Record) bool { return r.Ev == core.EvRelease.String() && r.Ticket == tk }
}

// rawConn dials the server with a plain TCP connection.
func (ts *tserver) rawConn() net.Conn {
	ts.t.Helper()
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { c.Close() })
	return c
}

// rawRequest writes a complete HTTP/1.1 request with a JSON body.
func rawRequest(t *testing.T, c net.Conn, method, path, body string) {
	t.Helper()
	_, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, len(body), body)
	if err != nil {
		t.Fatal(err)
	}
}

// awaitConns waits until cond holds for the server's open connections.
func (ts *tserver) awaitConns(what string, cond func([]*edge.Conn) bool) {
	ts.t.Helper()
	if err := ts.s.edge.AwaitConns(ctxLimit(ts.t), cond); err != nil {
		ts.t.Fatalf("connections never reached %s: %v", what, err)
	}
}

// anyConn reports whether one connection satisfies f.
func anyConn(f func(c *edge.Conn) bool) func([]*edge.Conn) bool {
	return func(cs []*edge.Conn) bool {
		for _, c := range cs {
			if f(c) {
				return true
			}
		}
		return false
	}
}

// metrics returns the Prometheus text of the server's registry.
func (ts *tserver) metricsText() string {
	rec := httptest.NewRecorder()
	ts.s.met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// awaitMetrics waits until the metrics contain every line of want (the
// metrics feed applies scheduler records on its own goroutine).
func (ts *tserver) awaitMetrics(want ...string) {
	ts.t.Helper()
	err := ts.s.met.Await(ctxLimit(ts.t), func() bool {
		text := ts.metricsText()
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	})
	if err != nil {
		ts.t.Fatalf("metrics never showed %q: %v\n%s", want, err, ts.metricsText())
	}
}

// errorBody reads an error answer (a null param or code reads as "").
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   string `json:"param"`
		Code    string `json:"code"`
	} `json:"error"`
}
