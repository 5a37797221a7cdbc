// Package synth builds synthetic sherpa-onnx checkpoints: the files of a
// family's release layout, with the ONNX input and output names, shapes
// and metadata sherpa-onnx reads, and seeded random weights (meaningless
// audio and transcripts), a few hundred kilobytes each. The ONNX files are
// written by synth.py (embedded here) with Debian's python3-onnx and
// python3-numpy, which `make deps` installs; nothing is downloaded.
// synth.py is the entry point; common.py holds the shared helpers, tts.py,
// asr.py and speakers.py the families.
package synth

import (
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

//go:embed *.py
var scripts embed.FS

// Python is the interpreter with Debian's python3-onnx (the system one:
// a pyenv or virtualenv python3 on PATH may lack the package).
var Python = "/usr/bin/python3"

// Available reports whether the generator can run here.
func Available() error {
	out, err := exec.Command(Python, "-c", "import onnx, numpy").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s with onnx and numpy (Debian python3-onnx python3-numpy, installed by make deps): %v: %s", native.ErrUnavailable, Python, err, out)
	}
	return nil
}

// Generate writes family's files into dir (created) from seed.
func Generate(family, dir string, seed uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sluice-sherpa-synth-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	entries, err := scripts.ReadDir(".")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := scripts.ReadFile(e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	cmd := exec.Command(Python, "-B", filepath.Join(tmp, "synth.py"), family, dir, strconv.FormatUint(seed, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("synth %s: %v: %s", family, err, out)
	}
	return nil
}

// Sources returns the files of dir as recipe sources (contents read now),
// sorted by path.
func Sources(dir string) ([]catalogue.Source, error) {
	var out []catalogue.Source
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, catalogue.Source{Dest: filepath.ToSlash(rel), Content: b})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Dest < out[j].Dest })
	return out, err
}
