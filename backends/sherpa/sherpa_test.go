package sherpa

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/sherpa/synth"
)

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// testRoot builds every synthetic checkpoint once per test binary into a
// temporary models root (removed by TestMain).
func testRoot(t *testing.T) string {
	t.Helper()
	native.SkipUnavailable(t, Available())
	native.SkipUnavailable(t, synth.Available())
	rootOnce.Do(func() {
		rootDir, rootErr = os.MkdirTemp("", "sluice-sherpa-root-")
		if rootErr == nil {
			rootErr = BuildSynthetic(rootDir, catalogue.DefaultSources(""), catalogue.MaxSlots, SyntheticNames...)
		}
	})
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return rootDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if rootDir != "" {
		os.RemoveAll(rootDir)
	}
	os.Exit(code)
}

func specOf(t *testing.T, root, name string, slots int, opts string) backends.Spec {
	t.Helper()
	cp, err := catalogue.Load(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	if opts == "" {
		opts = "{}"
	}
	return backends.Spec{Model: name, Task: cp.Task, Engine: Name, Checkpoint: cp.Dir, Options: json.RawMessage(opts), Slots: slots}
}

func TestPiperSpeaks(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	spec := specOf(t, root, PiperSynthetic, 1, "")
	if err := e.Validate(spec); err != nil {
		t.Fatal(err)
	}
	s, n, err := e.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	out, err := s.Infer(context.Background(), backends.Request{Input: []byte(`{"text":"Hello world. This is a test."}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capacity %d, %d bytes %s, children %d", n, len(out.Data), out.ContentType, childLoads.Load())
}
