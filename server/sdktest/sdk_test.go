// Package sdktest drives Sluice with the official openai npm SDK
// (openai@6.49.0, which `make deps` installs into .deps/npm): sdk.mjs runs
// against a loopback server with the real engines (flite, eSpeak NG,
// pocketsphinx, silero through ONNX Runtime) and an API key, and prints
// one JSON line per check; TestOpenAISDK requires every check by name
// (CONTRACT.md openai.sdk).
//
// The test fails when node, the openai package or an engine library is
// missing (`make deps`, which `make test` runs first, installs them). The
// node_modules folder is $SLUICE_SDK_NODE_MODULES, else the npm prefix of
// the engines' packages (SLUICE_NPM_PREFIX, default .deps/npm).
package sdktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/espeak"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
	"github.com/sluice-dev/sluice/server"
)

// TestMain runs the tests, then writes the table of every SDK call they
// made to $SLUICE_SDK_TABLE when it is set (make sdk-table), and checks
// for leaked goroutines as goleak.VerifyTestMain does.
func TestMain(m *testing.M) {
	code := m.Run()
	if path := os.Getenv("SLUICE_SDK_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(calls.markdown()), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "sdk table: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// limit bounds the script's whole run; it stops by itself.
const limit = 2 * time.Minute

// checks are the script's checks the test requires, each passed.
var checks = []string{
	"speech.wav", "speech.pcm", "speech.pcm.espeak", "speech.flac", "speech.opus", "speech.mp3", "speech.aac",
	"transcribe.wav", "transcribe.mp3", "transcribe.flac", "transcribe.opus", "transcribe.webm", "transcribe.m4a",
	"transcribe.srt", "transcribe.vtt", "transcribe.verbose_json.words", "transcribe.stream",
	"speech.stream.sse", "speech.stream.audio",
	"transcribe.text_file", "translations", "models.list", "auth.wrong_key",
	"models.retrieve", "models.retrieve.not_found", "models.delete", "models.delete.not_found",
	"names.list", "names.retrieve", "names.speech", "names.speech.voice_map", "names.speech.bad_voice", "names.transcribe", "names.bad_request.param",
}

// result is one line of sdk.mjs.
type result struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Call   string `json:"call"`
	Result string `json:"result"`
}

// missing fails the test for a missing dependency: `make deps`, which
// `make test` runs first, installs every one.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s (make deps installs it)", fmt.Sprintf(format, args...))
}

// serveSluice builds a models root holding the default checkpoints names,
// starts a loopback server on it with the real engines and the API key key
// (its configuration changed by mutate), registers models and returns the
// server's address; the server is shut down when the test ends.
func serveSluice(t *testing.T, key string, mutate func(*server.Config), names []string, models []server.ModelEntry) string {
	t.Helper()
	root := t.TempDir()
	if err := engines.BuildDefaultRoot(root, "", names...); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.ParallelJobs, cfg.ModelsRoot, cfg.APIKey = true, root, key
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := server.New(cfg, server.Options{Engines: engines.Registry(engines.Config{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	if err := s.RegisterModels(context.Background(), models); err != nil {
		t.Fatal(err)
	}
	return ln.Addr().String()
}

func nodeModules() string {
	if m := os.Getenv("SLUICE_SDK_NODE_MODULES"); m != "" {
		return m
	}
	return filepath.Join(catalogue.DefaultNPMPrefix(), "node_modules")
}

func TestOpenAISDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed: %v", err)
	}
	mods := nodeModules()
	if _, err := os.Stat(filepath.Join(mods, "openai", "package.json")); err != nil {
		missing(t, "the openai npm package is not under %s: %v", mods, err)
	}
	const key, mgmt = "sdk-test-key", "sdk-test-management-key"
	two := json.RawMessage("2")
	addr := serveSluice(t, key, func(c *server.Config) {
		c.ShutdownTimeout = 20 * time.Second
		c.UIManagement, c.ManagementKey = true, mgmt // models.delete is a management call (CONTRACT.md unreg.delete)
	},
		[]string{catalogue.FliteSLT, catalogue.EspeakEn, catalogue.PocketsphinxEnUS, catalogue.SileroV5},
		[]server.ModelEntry{
			{ID: "tts", Spec: server.ModelSpec{Engine: flite.Name, Task: "tts", Checkpoint: catalogue.FliteSLT, Slots: two,
				Aliases: []string{"tts-1", "tts-1-hd", "gpt-4o-mini-tts"}}},
			{ID: "tts-espeak", Spec: server.ModelSpec{Engine: espeak.Name, Task: "tts", Checkpoint: catalogue.EspeakEn, Slots: json.RawMessage("1"),
				VoiceMap: map[string]string{"alloy": "en-gb-scotland"}}}, // CONTRACT.md names.voice-map
			{ID: "asr", Spec: server.ModelSpec{Engine: pocketsphinx.Name, Task: "asr", Checkpoint: catalogue.PocketsphinxEnUS, Slots: two,
				Aliases: []string{"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe"}}},
			{ID: "vad", Spec: server.ModelSpec{Engine: onnx.Name, Task: "vad", Checkpoint: catalogue.SileroV5, Slots: two}},
			// models.delete removes this one.
			{ID: "tts-delete", Spec: server.ModelSpec{Engine: flite.Name, Task: "tts", Checkpoint: catalogue.FliteSLT, Slots: json.RawMessage("1")}},
		})

	// What browsers' MediaRecorder (WebM/Opus) and phones (M4A/AAC) record,
	// written by FFmpeg (backends/audio/av) from flite's speech of the
	// script's sentence, for the uploads the SDK sends as files.
	webm, m4a := recordings(t, "Open the garage door.")
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sdk.mjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods, "SLUICE_SDK_WEBM="+webm, "SLUICE_SDK_M4A="+m4a,
		"SLUICE_SDK_BASE_URL=http://"+addr+"/v1", "SLUICE_SDK_API_KEY="+key, "SLUICE_SDK_MANAGEMENT_KEY="+mgmt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("node sdk.mjs: %v\nstderr:\n%s", err, stderr.Bytes())
	}

	got := map[string]result{}
	var table strings.Builder
	fmt.Fprintf(&table, "%-30s | %-4s | %s\n", "SDK call", "ok", "result")
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("sdk.mjs printed a line that is not a check: %q", sc.Text())
			continue
		}
		got[r.Check] = r
		calls.add(r.Check, r.OK, r.Call, r.Result)
		ok := "ok"
		if !r.OK {
			ok = "FAIL"
		}
		fmt.Fprintf(&table, "%-30s | %-4s | %s: %s\n", r.Check, ok, r.Call, r.Result)
	}
	t.Logf("openai@6.49.0 SDK calls against Sluice:\n%s", table.String())
	for _, c := range checks {
		r, ok := got[c]
		switch {
		case !ok:
			t.Errorf("check %s: not reported by sdk.mjs", c)
		case !r.OK:
			t.Errorf("check %s failed: %s -> %s", c, r.Call, r.Result)
		}
	}
	if r, ok := got["script"]; ok {
		t.Errorf("sdk.mjs failed: %s", r.Result)
	}
}
