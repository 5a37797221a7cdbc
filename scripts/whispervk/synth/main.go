// Command synth writes the synthetic Whisper models that
// `make whisper-vulkan-check` runs whisper.cpp 1.9.1 on: tiny.bin and
// bench.bin (backends/whisper/synth's Tiny and Bench dims, seeded with
// whisper.Seed, the same bytes as the catalogue's checkpoints), in the
// ggml f16/f32 layout whisper.cpp 1.5.0 and 1.9.1 both load. An existing
// file with the same bytes is left alone.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

func main() {
	dir := flag.String("dir", "out/whispervk", "folder to write tiny.bin and bench.bin into")
	flag.Parse()
	if err := run(*dir); err != nil {
		slog.Error("synth", "err", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("models folder: %w", err)
	}
	for _, d := range []synth.Dims{synth.Tiny, synth.Bench} {
		b, err := synth.Bytes(d, whisper.Seed)
		if err != nil {
			return fmt.Errorf("synth %s: %w", d.Name, err)
		}
		p := filepath.Join(dir, d.Name+".bin")
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return fmt.Errorf("rename %s: %w", p, err)
		}
	}
	return nil
}
