// Package engines assembles the real speech engines (flite, pocketsphinx,
// espeak, onnx, whisper, sherpa) into a backends.Registry, validates a models root against
// them, and owns the matched-output check of the contract: the same
// requests answered by a pool at capacity 1 and by pools of 2 and 4 slots
// with as many concurrent clients give byte-identical outputs (timing
// fields removed). `make validate-engines` prints that table (command
// cmd/sluice-validate-engines); `make bench-engines` runs this package's
// benchmarks.
//
// Threading rule: Registry, ScanRoot and the check functions are safe for
// concurrent use; each check owns the pools it opens and closes them.
package engines

import (
	"fmt"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/diarize"
	"github.com/sluice-dev/sluice/backends/espeak"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/backends/whisper"
)

// Config configures the real engines.
type Config struct {
	_ struct{}
	// ONNXRuntime is the ONNX Runtime library ("" = onnx.DefaultLibrary()).
	ONNXRuntime string
}

// Registry returns the real engines by name.
func Registry(c Config) backends.Registry {
	return backends.Registry{
		flite.Name:        flite.New(),
		pocketsphinx.Name: pocketsphinx.New(),
		espeak.Name:       espeak.New(),
		onnx.Name:         onnx.New(onnx.Config{Library: c.ONNXRuntime}),
		diarize.Name:      diarize.New(diarize.Config{ONNXRuntime: c.ONNXRuntime}),
		whisper.Name:      whisper.New(),
		sherpa.Name:       sherpa.New(sherpa.Config{}),
	}
}

// SpecFor builds the model spec of a catalogue checkpoint: its task and
// engine, its folder as the checkpoint, the given options (the engines
// merge the manifest's defaults under them) and slot count.
func SpecFor(model string, cp *catalogue.Checkpoint, slots int) backends.Spec {
	return backends.Spec{
		Model: model, Task: cp.Task, Engine: cp.Engine, Checkpoint: cp.Dir,
		Options: []byte("{}"), Slots: slots,
	}
}

// ScanRoot scans a models root and validates every checkpoint with its
// engine at one slot, so a root whose files an engine would refuse fails
// as a whole (catalogue.Scan returns no partial catalogue).
func ScanRoot(root string, reg backends.Registry) (*catalogue.Catalogue, error) {
	return catalogue.Scan(root, catalogue.ScanOptions{Check: func(cp *catalogue.Checkpoint) error {
		eng, err := reg.Get(cp.Engine)
		if err != nil {
			return err
		}
		if err := eng.Validate(SpecFor(cp.Name, cp, 1)); err != nil {
			return fmt.Errorf("engine %s: %w", cp.Engine, err)
		}
		return nil
	}})
}
