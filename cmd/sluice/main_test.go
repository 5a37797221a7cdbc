package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-dev/sluice/server"
)

func TestMain(m *testing.M) {
	crashServeMain() // the crash loop re-executes this binary as `sluice serve`
	goleak.VerifyTestMain(m)
}

const waitLimit = 20 * time.Second

// syncBuffer is a bytes.Buffer safe for the server's log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestParseServeFlags(t *testing.T) {
	o, err := parseServeFlags([]string{"--listen", "127.0.0.1:9", "--parallel-jobs", "--ui-management", "--fixture",
		"--api-key", "k", "--management-key", "m", "--max-body", "1MiB", "--models-root", "/m", "--max-loaded-models", "3",
		"--memory-budget", "2GiB", "--idle-timeout", "1m", "--admission-timeout", "2s", "--admission-ceiling", "1m",
		"--serialize-cold-loads", "--shutdown-timeout", "5s", "--config", "c.yaml", "--trace", "t.ndjson",
		"--log-level", "debug", "--state-dir", "/s"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Listen != "127.0.0.1:9" || !c.ParallelJobs || !c.UIManagement || !c.Fixture || c.APIKey != "k" ||
		c.ManagementKey != "m" || c.MaxBody != 1<<20 || c.ModelsRoot != "/m" || c.MaxLoadedModels != 3 ||
		c.MemoryBudgetMB != 2048 || c.IdleTimeout != time.Minute || c.AdmissionTimeout != 2*time.Second ||
		c.AdmissionCeiling != time.Minute || !c.SerializeColdLoads || c.ShutdownTimeout != 5*time.Second ||
		o.configFile != "c.yaml" || c.TraceFile != "t.ndjson" || o.logLevel.String() != "DEBUG" || c.StateDir != "/s" {
		t.Fatalf("%+v", o)
	}
	d, err := parseServeFlags(nil, os.Stderr)
	if err != nil || d.cfg.Listen != "127.0.0.1:8080" || d.cfg.MaxBody != 25<<20 || d.cfg.ParallelJobs || d.cfg.UIManagement ||
		d.cfg.ReadHeaderTimeout == 0 || d.cfg.IdleConnTimeout == 0 {
		t.Fatalf("defaults: %+v %v", d.cfg, err)
	}
	for _, bad := range [][]string{{"--max-body", "lots"}, {"--memory-budget", "-1"}, {"--log-level", "loud"}, {"extra"}} {
		if _, err := parseServeFlags(bad, &bytes.Buffer{}); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}

func TestParseSizes(t *testing.T) {
	for in, want := range map[string]int64{"10": 10, "1k": 1024, "25MiB": 25 << 20, "1.5GB": 3 << 29, "2 gib": 2 << 30} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Fatalf("%q: %d %v", in, got, err)
		}
	}
	for in, want := range map[string]int64{"512": 512, "1GiB": 1024, "1": 1, "1KiB": 1} {
		if got, err := parseMB(in); err != nil || got != want {
			t.Fatalf("%q: %d %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "x", "1XB", "-3MB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// serving is one `sluice serve` running in the test.
type serving struct {
	s    *server.Server
	url  string
	logs *syncBuffer
	sigs chan os.Signal
	done chan error
}

func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	sv := &serving{logs: &syncBuffer{}, sigs: make(chan os.Signal), done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sv.done <- serve(context.Background(), append([]string{"--listen", "127.0.0.1:0"}, args...), sv.logs, sv.sigs,
			func(s *server.Server, a net.Addr) {
				sv.s, sv.url = s, "http://"+a.String()
				close(ready)
			})
	}()
	select {
	case <-ready:
	case err := <-sv.done:
		t.Fatalf("serve: %v\n%s", err, sv.logs)
	}
	t.Cleanup(func() {
		select {
		case sv.sigs <- syscall.SIGTERM:
		case <-sv.done:
			return
		}
		if err := <-sv.done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return sv
}

func get(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return b.String()
}

// `sluice serve` with the embedded default models, `sluice models` against
// it, and the signal handling: the first signal shuts down, a second one is
// logged and changes nothing (CONTRACT.md time.shutdown-second-signal).
func TestServeModelsAndSignals(t *testing.T) {
	sv := startServe(t, "--parallel-jobs", "--ui-management", "--fixture")
	if body := get(t, sv.url+"/v1/models/fixture-echo"); !strings.Contains(body, `"state":"ready"`) || !strings.Contains(body, `"slots":4`) {
		t.Fatal(body)
	}
	var out bytes.Buffer
	if err := models(context.Background(), []string{"--target", sv.url}, &out, os.Stderr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "fixture-echo") ||
		!strings.Contains(lines[1], "ready") {
		t.Fatalf("table:\n%s", out.String())
	}

	// Hold a request at a gate, shut down with one signal, send a second.
	answer := make(chan string, 1)
	go func() {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		res, err := c.Post(sv.url+"/v1/models/fixture-echo/infer", "application/json", strings.NewReader(`{"input":{"gate":"g"}}`))
		if err != nil {
			answer <- err.Error()
			return
		}
		defer res.Body.Close()
		answer <- res.Status
	}()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := sv.s.Fixture().Gates().AwaitWaiting(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	sv.sigs <- syscall.SIGTERM
	<-sv.s.Runtime().Stopping()
	sv.sigs <- syscall.SIGINT
	sv.s.Fixture().Gates().Open("g")
	if got := <-answer; got != "200 OK" {
		t.Fatalf("the running request got %s", got)
	}
	if err := <-sv.done; err != nil {
		t.Fatal(err)
	}
	logs := sv.logs.String()
	if strings.Count(logs, "experimental") != 1 || !strings.Contains(logs, "signal received while shutting down") {
		t.Fatalf("logs:\n%s", logs)
	}
	sv.done <- nil // for the cleanup
}

// Without --parallel-jobs: no warning; the default model serves one slot.
func TestServeLegacy(t *testing.T) {
	sv := startServe(t, "--fixture", "--shutdown-timeout", "5s")
	if body := get(t, sv.url+"/v1/models/fixture-echo"); !strings.Contains(body, `"slots":1`) {
		t.Fatal(body)
	}
	if strings.Contains(sv.logs.String(), "level=WARN") {
		t.Fatalf("legacy mode warned:\n%s", sv.logs)
	}
}

// A --config file is strict: slots in the legacy mode stop the startup.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(file, []byte("models:\n  - id: a\n    engine: fixture\n    slots: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := serve(context.Background(), []string{"--listen", "127.0.0.1:0", "--fixture", "--config", file}, &syncBuffer{}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "parallel-jobs") {
		t.Fatalf("legacy slots: %v", err)
	}
	trace := filepath.Join(dir, "trace.ndjson")
	sv := startServe(t, "--fixture", "--parallel-jobs", "--config", file, "--trace", trace, "--api-key", "k")
	if body := get(t, sv.url+"/v1/models"); !strings.Contains(body, "invalid_api_key") {
		t.Fatal(body)
	}
	var out bytes.Buffer
	if err := models(context.Background(), []string{"--target", sv.url}, &out, &out); err == nil {
		t.Fatal("models without the key succeeded")
	}
	if err := models(context.Background(), []string{"--target", sv.url, "--api-key", "k"}, &out, &out); err != nil ||
		!strings.Contains(out.String(), "a ") {
		t.Fatalf("%v\n%s", err, out.String())
	}
	sv.sigs <- syscall.SIGTERM
	if err := <-sv.done; err != nil {
		t.Fatal(err)
	}
	sv.done <- nil
	b, err := os.ReadFile(trace)
	if err != nil || !strings.Contains(string(b), `"ev":"SubmitManager"`) || !strings.Contains(string(b), `"ef":"ShutdownComplete"`) {
		t.Fatalf("trace: %v\n%s", err, b)
	}
}

func TestRun(t *testing.T) {
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"fixture-echo", `{"a":1}`}, &out, &errs); err != nil {
		t.Fatal(err, errs.String())
	}
	if !strings.Contains(out.String(), `"model":"fixture-echo"`) {
		t.Fatal(out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"--stream", "--spec", `{"engine":"fixture","slots":2,"options":{"chunks":2}}`, "x", "plain text"}, &out, &errs); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `"chunk":1`) {
		t.Fatalf("stream:\n%s", out.String())
	}
	for _, args := range [][]string{{"nope", "1"}, {"fixture-echo"}, {"--spec", `{"engine":"fixture","bogus":1}`, "x", "1"},
		{"--spec", `{"engine":"fixture"}`, "x", `{"fail":true}`}} {
		if err := run(context.Background(), args, &out, &errs); err == nil {
			t.Fatalf("%v succeeded", args)
		}
	}
}

func TestMainCode(t *testing.T) {
	var out, errs bytes.Buffer
	if mainCode(nil, &out, &errs) != 2 || mainCode([]string{"bogus"}, &out, &errs) != 2 {
		t.Fatal("usage errors")
	}
	if mainCode([]string{"help"}, &out, &errs) != 0 || !strings.Contains(out.String(), "sluice serve") {
		t.Fatal("help")
	}
	if mainCode([]string{"demo"}, &out, &errs) != 0 {
		t.Fatal(errs.String())
	}
	if mainCode([]string{"models", "--target", "http://127.0.0.1:1"}, &out, &errs) != 1 {
		t.Fatal("models against nothing")
	}
}
