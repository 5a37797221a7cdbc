package sherpa

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/childload"
)

// Loads that can end the process. sherpa-onnx calls exit() on many
// failed checks and ONNX Runtime's C++ exceptions abort where the C API
// does not catch them; what Go can check it checks first (resolve), and
// the first in-process load of a checkpoint is preceded by the same load
// in a child (childload): this executable, re-executed with
// SLUICE_SHERPA_CHILD set, which loads the model, runs one small request
// and exits 0. A child that exits otherwise (or runs past its timeout)
// fails the load with its output's head and tail; the server never loads
// the checkpoint. Checkpoints that passed are remembered by the hash of
// their manifest and options (childKey), so a reload costs nothing (a
// changed file changes the manifest's hashes, which the catalogue
// verifies before this).
//
// The child is started by init (below) in any binary that links this
// package, before main or TestMain run, so no binary has to opt in.
var prober = &childload.Prober{Env: "SLUICE_SHERPA_CHILD", Timeout: 2 * time.Minute}

// loader is the child's whole life: load the spec, run one request, exit.
var loader = childload.Loader{
	Name: "sherpa",
	Open: func(ctx context.Context, spec backends.Spec) (backends.Session, error) {
		espeakData.mu.Lock()
		espeakData.inPlace = true // one load, then exit: no copy (espeakdata.go)
		espeakData.mu.Unlock()
		s, _, err := New(Config{NoChild: true}).Open(ctx, spec)
		return s, err
	},
	Request: func(s backends.Session) backends.Request { return childRequest(s.(*session).m.kind) },
}

func init() { prober.Serve(loader.Main) }

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
// bytes (its files' hashes) and the spec's options, whatever the model's
// ID.
func childKey(spec backends.Spec, c config) string {
	h := sha256.New()
	b, _ := os.ReadFile(filepath.Join(c.dir, catalogue.ManifestName))
	h.Write(b)
	h.Write([]byte{0})
	h.Write(spec.Options)
	return hex.EncodeToString(h.Sum(nil))
}

// childCheck loads spec in a child process unless an identical one
// passed before (prober.Runs counts the children started).
func childCheck(ctx context.Context, spec backends.Spec, c config) error {
	key := func([]byte) string { return childKey(spec, c) }
	if err := prober.CheckSpec(ctx, spec, "checkpoint "+c.name, key); err != nil {
		return fmt.Errorf("sherpa: %w", err)
	}
	return nil
}
