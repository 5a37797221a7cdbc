package sherpa

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// Loads that can end the process. sherpa-onnx calls exit() on many
// failed checks and ONNX Runtime's C++ exceptions abort where the C API
// does not catch them; what Go can check it checks first (resolve), and
// the first in-process load of a checkpoint is preceded by the same load
// in a child: this executable, re-executed with SLUICE_SHERPA_CHILD set,
// which loads the model, runs one small request and exits 0. A child that
// exits otherwise (or runs past childTimeout) fails the load with its
// stderr's tail; the server never loads the checkpoint. Checkpoints that
// passed are remembered by the hash of their manifest and options, so a
// reload costs nothing (a changed file changes the manifest's hashes,
// which the catalogue verifies before this).
//
// The child is started by init (below) in any binary that links this
// package, before main or TestMain run, so no binary has to opt in.

// childEnv carries the spec (JSON) to the child.
const childEnv = "SLUICE_SHERPA_CHILD"

// childTimeout bounds one child load.
const childTimeout = 2 * time.Minute

var childPassed sync.Map // key -> true

func init() {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec))
	}
}

// childMain is the child's whole life: load spec, run one request, exit.
func childMain(specJSON string) int {
	var spec backends.Spec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "sherpa child: spec:", err)
		return 2
	}
	e := New(Config{NoChild: true})
	s, _, err := e.Open(context.Background(), spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sherpa child: open:", err)
		return 3
	}
	discard := func(json.RawMessage) error { return nil }
	if _, err := s.Infer(context.Background(), childRequest(s.(*session).m.kind), discard); err != nil {
		fmt.Fprintln(os.Stderr, "sherpa child: request:", err)
		return 4
	}
	if err := s.Close(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "sherpa child: close:", err)
		return 5
	}
	return 0
}

// childRequest is the child's one small request of each kind.
func childRequest(kind string) backends.Request {
	switch kind {
	case "tts":
		return backends.Request{Input: []byte(`{"text":"Hello."}`)}
	case "diarization":
		return backends.Request{Input: []byte(`{"sample_rate":16000}`), Data: make([]byte, 2*16000*12)} // two segmentation windows
	case "online":
		return backends.Request{Live: &backends.LiveReplay{Pieces: []backends.LivePiece{{Samples: make([]int16, 3200), Rate: 16000, Commit: true}}}}
	}
	return backends.Request{Input: []byte(`{"sample_rate":16000}`), Data: make([]byte, 6400)}
}

// childKey identifies what a child checked: the checkpoint's manifest
// bytes (its files' hashes) and the spec's options.
func childKey(spec backends.Spec, c config) string {
	h := sha256.New()
	b, _ := os.ReadFile(filepath.Join(c.dir, catalogue.ManifestName))
	h.Write(b)
	h.Write([]byte{0})
	h.Write(spec.Options)
	return hex.EncodeToString(h.Sum(nil))
}

// childCheck loads spec in a child process unless an identical one
// passed before. ChildLoads counts the children started.
func childCheck(ctx context.Context, spec backends.Spec, c config) error {
	key := childKey(spec, c)
	if _, ok := childPassed.Load(key); ok {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sherpa: the child load needs this executable: %w", err)
	}
	spec.Slots = 1
	sj, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, childTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(sj))
	stderr := &headTail{max: 1024}
	cmd.Stderr = stderr
	start := time.Now()
	err = cmd.Run()
	childLoads.Add(1)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return backends.Invalidf("sherpa: checkpoint %s failed to load in a child process (%v), so it is not loaded here: %s", c.name, err, stderr)
	}
	slog.Debug("sherpa child load", slog.String("checkpoint", c.name), slog.Duration("took", time.Since(start)))
	childPassed.Store(key, true)
	return nil
}

// headTail keeps the first and the last max bytes written to it (a
// crash's first lines name the signal, its last ones the C frames).
type headTail struct {
	max        int
	head, tail bytes.Buffer
	cut        bool
}

func (t *headTail) Write(p []byte) (int, error) {
	n := len(p)
	if room := t.max - t.head.Len(); room > 0 {
		k := min(room, len(p))
		t.head.Write(p[:k])
		p = p[k:]
	}
	t.tail.Write(p)
	if over := t.tail.Len() - t.max; over > 0 {
		t.tail.Next(over)
		t.cut = true
	}
	return n, nil
}

// String returns what was kept, trimmed.
func (t *headTail) String() string {
	sep := ""
	if t.cut {
		sep = " [...] "
	}
	return string(bytes.TrimSpace([]byte(t.head.String() + sep + t.tail.String())))
}

// childLoads counts the child processes started (tests and benchmarks).
var childLoads atomicCounter
