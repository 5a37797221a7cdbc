// Package uitest runs Sluice's dashboard in a real browser: Debian's
// chromium driven by playwright-core (dashboard.cjs) against loopback
// servers with fixture models that these tests start and stop.
//
// Both tests are skipped unless asked for, since they need chromium and
// node packages that `make ui-test` installs:
//
//	SLUICE_UI_TEST=1            TestDashboardBrowser (make ui-test); its
//	                            screenshots go to $SLUICE_UI_OUT
//	                            (default out/ui-test)
//	SLUICE_UI_SCREENSHOT=FILE   TestDashboardScreenshot: the screenshot of
//	                            docs/dashboard.png (make ui-screenshot)
//
// playwright-core is taken from $SLUICE_UI_NODE_MODULES (default
// .deps/ui/node_modules).
package uitest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// limit bounds the whole browser run; it stops by itself.
const limit = 3 * time.Minute

// tserver is one loopback server under test.
type tserver struct {
	t      *testing.T
	s      *server.Server
	url    string
	served chan error
	client *http.Client
	key    string // Bearer key of do, if any
}

func startServer(t *testing.T, management bool, root string) *tserver {
	t.Helper()
	return startServerWith(t, management, root, nil)
}

// startServerWith is startServer with cfg changed by mutate (keys).
func startServerWith(t *testing.T, management bool, root string, mutate func(*server.Config)) *tserver {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.ParallelJobs, cfg.UIManagement, cfg.Fixture = true, management, true
	cfg.ModelsRoot = root
	if mutate != nil {
		mutate(&cfg)
	}
	cfg.ShutdownTimeout = 20 * time.Second
	logLevel := slog.LevelError
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		logLevel = slog.LevelDebug
	}
	s, err := server.New(cfg, server.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &tserver{t: t, s: s, url: "http://" + ln.Addr().String(), served: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{}}}
	go func() { ts.served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ts.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-ts.served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ts
}

// do sends a request and returns the status and body, with the
// server's management key when it has one.
func (ts *tserver) do(method, path, body string) (int, string) {
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		ts.t.Error(err)
		return 0, ""
	}
	if ts.key != "" {
		req.Header.Set("Authorization", "Bearer "+ts.key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // CONTRACT.md err.content-type
	}
	res, err := ts.client.Do(req)
	if err != nil {
		ts.t.Errorf("%s %s: %v", method, path, err)
		return 0, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (ts *tserver) must(method, path, body string) {
	ts.t.Helper()
	if st, b := ts.do(method, path, body); st != 200 {
		ts.t.Fatalf("%s %s: %d %s", method, path, st, b)
	}
}

// await blocks until cond holds for the status of model id, re-checking
// after every scheduler record.
func (ts *tserver) await(id string, cond func(core.ModelStatus) bool) {
	ts.t.Helper()
	ch, cancel := ts.s.Runtime().Subscribe(1 << 14)
	defer cancel()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		if st, err := ts.s.Runtime().StatusOf(id); err == nil && cond(st) {
			return
		}
		select {
		case _, ok := <-ch:
			if !ok {
				ch, cancel = ts.s.Runtime().Subscribe(1 << 14)
				defer cancel()
			}
		case <-timer.C:
			ts.t.Fatalf("model %s never reached the state wanted: %s", id, ts.s.Runtime().Describe())
		}
	}
}

// writeCheckpoint writes a fixture checkpoint folder under root.
func writeCheckpoint(t *testing.T, root, name, task, desc string, maxSlots int) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := []byte("fixture weights of " + name)
	if err := os.WriteFile(filepath.Join(dir, "weights.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	m := catalogue.Manifest{Schema: catalogue.Schema, Name: name, Task: task, Engine: "fixture", Description: desc,
		Files:    []catalogue.File{{Path: "weights.bin", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}},
		Options:  json.RawMessage(`{"capacity":4}`),
		Parallel: catalogue.Parallel{MaxSlots: maxSlots}}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, catalogue.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// repoRoot is the module root (this package is server/uitest).
func repoRoot(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// nodeCmd prepares `node dashboard.cjs args...` with playwright-core on
// NODE_PATH.
func nodeCmd(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	mods := os.Getenv("SLUICE_UI_NODE_MODULES")
	if mods == "" {
		mods = filepath.Join(repoRoot(t), ".deps", "ui", "node_modules")
	}
	if _, err := os.Stat(filepath.Join(mods, "playwright-core", "package.json")); err != nil {
		t.Fatalf("playwright-core is not installed under %s (run `make ui-test`): %v", mods, err)
	}
	cmd := exec.CommandContext(ctx, "node", append([]string{"dashboard.cjs"}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// TestDashboardBrowser opens the dashboard in headless chromium against a
// management server with three fixture models (alpha and beta ready, gamma
// unloaded), a read-only server, and two servers with keys (CONTRACT.md
// ui.shell, ui.sign-in, ui.api-key-only, ui.sign-out): one with
// --api-key and --management-key, one with --api-key alone; and checks it
// (see dashboard.cjs).
func TestDashboardBrowser(t *testing.T) {
	if os.Getenv("SLUICE_UI_TEST") == "" {
		t.Skip("set SLUICE_UI_TEST=1 (make ui-test) to run the browser test")
	}
	out := os.Getenv("SLUICE_UI_OUT")
	if out == "" {
		out = filepath.Join(repoRoot(t), "out", "ui-test")
	}
	root := t.TempDir()
	writeCheckpoint(t, root, "voice-demo", "tts", "a fixture voice", 4)

	ts := startServer(t, true, root)
	ts.must("PUT", "/v1/models/alpha", `{"engine":"fixture","task":"tts","slots":2}`)
	ts.must("PUT", "/v1/models/beta", `{"engine":"fixture","task":"asr","slots":2,"options":{"capacity":4}}`)
	ts.must("PUT", "/v1/models/gamma", `{"engine":"fixture","task":"vad"}`)
	ts.must("POST", "/v1/models/gamma/unload", "")
	ro := startServer(t, false, t.TempDir())
	if err := ro.s.RegisterModels(context.Background(), []server.ModelEntry{{ID: "ro-model", Spec: server.ModelSpec{Engine: "fixture"}}}); err != nil {
		t.Fatal(err)
	}
	keyed := startServerWith(t, true, t.TempDir(), func(c *server.Config) { c.APIKey, c.ManagementKey = "k-api", "k-mgmt" })
	keyed.key = "k-mgmt"
	keyed.must("PUT", "/v1/models/kappa", `{"engine":"fixture","task":"tts","slots":1}`)
	apiOnly := startServerWith(t, true, t.TempDir(), func(c *server.Config) { c.APIKey = "k-api" })
	if err := apiOnly.s.RegisterModels(context.Background(), []server.ModelEntry{{ID: "lambda", Spec: server.ModelSpec{Engine: "fixture"}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := nodeCmd(t, ctx, "test", "--url", ts.url+"/", "--ro-url", ro.url+"/", "--keyed-url", keyed.url+"/",
		"--api-only-url", apiOnly.url+"/", "--out", out)
	b, err := cmd.CombinedOutput()
	t.Logf("dashboard.cjs:\n%s", b)
	if err != nil {
		t.Fatalf("browser test failed: %v", err)
	}
	t.Logf("screenshots in %s", out)
}

// TestDashboardScreenshot makes docs/dashboard.png: three models, one
// loading (held at a fixture load gate), one busy with a queue (two
// requests held at a gate, three queued) and one unloaded, after a short
// history of queues and admission waits for the sparklines.
func TestDashboardScreenshot(t *testing.T) {
	file := os.Getenv("SLUICE_UI_SCREENSHOT")
	if file == "" {
		t.Skip("set SLUICE_UI_SCREENSHOT=FILE (make ui-screenshot) to make the dashboard screenshot")
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(repoRoot(t), file)
	}
	root := filepath.Join(os.TempDir(), "sluice-demo", "models") // a readable path in the picture
	if err := os.RemoveAll(filepath.Dir(root)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(root)) })
	writeCheckpoint(t, root, "en-us-amy", "tts", "US English voice, medium quality", 4)
	writeCheckpoint(t, root, "en-whisper-base", "asr", "English speech recognition", 2)
	writeCheckpoint(t, root, "silero-vad", "vad", "voice activity detection", 8)
	ts := startServer(t, true, root)
	gates := ts.s.Fixture().Gates()

	ts.must("PUT", "/v1/models/vad-en", `{"engine":"fixture","task":"vad","checkpoint":"silero-vad","slots":1}`)
	ts.must("PUT", "/v1/models/asr-en", `{"engine":"fixture","task":"asr","checkpoint":"en-whisper-base","slots":2,"options":{"capacity":4}}`)

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := nodeCmd(t, ctx, "screenshot", "--url", ts.url+"/", "--out", file)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	expect := func(word string) {
		for lines.Scan() {
			t.Logf("dashboard.cjs: %s", lines.Text())
			if lines.Text() == word {
				return
			}
		}
		t.Fatalf("dashboard.cjs ended before %s", word)
	}
	expect("READY")

	var wg sync.WaitGroup
	infer := func(model, input string) {
		wg.Go(func() { ts.do("POST", "/v1/models/"+model+"/infer", `{"input":`+input+`}`) })
	}
	// The history the sparklines show: rounds of two requests held at a
	// gate with a growing queue behind them, released after a while, so
	// the queued ones are admitted after a visible wait. (The pauses only
	// shape the picture; every ordering is awaited.)
	pace := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	for _, q := range []int{1, 3, 2, 4, 1} {
		gate := fmt.Sprintf("round-%d-%d", q, time.Now().UnixNano())
		for range 2 {
			infer("asr-en", `{"gate":"`+gate+`"}`)
		}
		ts.await("asr-en", func(st core.ModelStatus) bool { return st.ActiveSlots == 2 })
		for range q {
			infer("asr-en", `{"gate":"`+gate+`"}`)
		}
		ts.await("asr-en", func(st core.ModelStatus) bool { return st.QueuedRequests == q })
		for range 3 {
			infer("vad-en", `{"infer_ms":40}`)
		}
		pace(1500 * time.Millisecond)
		gates.Open(gate)
		ts.await("asr-en", func(st core.ModelStatus) bool { return st.ActiveSlots == 0 && st.QueuedRequests == 0 })
		pace(700 * time.Millisecond)
	}
	// The scene: vad-en unloaded, asr-en busy with three queued, tts-en
	// loading behind its gate.
	ts.must("POST", "/v1/models/vad-en/unload", "")
	for range 2 {
		infer("asr-en", `{"gate":"final"}`)
	}
	ts.await("asr-en", func(st core.ModelStatus) bool { return st.ActiveSlots == 2 })
	for range 3 {
		infer("asr-en", `{"gate":"final"}`)
	}
	ts.await("asr-en", func(st core.ModelStatus) bool { return st.QueuedRequests == 3 })
	wg.Go(func() {
		ts.do("PUT", "/v1/models/tts-en", `{"engine":"fixture","task":"tts","checkpoint":"en-us-amy","slots":4,"options":{"gates":{"load":"tts-load"}}}`)
	})
	if err := gates.AwaitWaiting(ctx, "tts-load", 1); err != nil {
		t.Fatal(err)
	}
	pace(2500 * time.Millisecond) // two more samples of the final queue
	if _, err := io.WriteString(stdin, "shoot\n"); err != nil {
		t.Fatal(err)
	}
	expect("DONE")
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dashboard.cjs: %v", err)
	}
	gates.Open("final")
	gates.Open("tts-load")
	wg.Wait()
	t.Logf("wrote %s", file)
}
