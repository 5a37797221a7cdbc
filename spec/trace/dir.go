package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// DirEnv names the environment variable with the directory of traces that
// ValidateDir reads by default (the same variable core/runtime writes to).
const DirEnv = "SLUICE_TRACE_DIR"

// DefaultDir is the trace directory when DirEnv is unset.
const DefaultDir = "out/traces"

// Dir returns the trace directory: $SLUICE_TRACE_DIR, or out/traces.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return DefaultDir
}

// FileResult is the verdict on one trace file.
type FileResult struct {
	Path    string
	Steps   int
	Options bool // an options file was found beside the trace
	Err     error
}

// OptionsFor reads <trace without .ndjson>.options.json, or returns nil
// when there is none.
func OptionsFor(path string) (*core.Options, error) {
	b, err := os.ReadFile(strings.TrimSuffix(path, ".ndjson") + ".options.json")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	var o core.Options
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("trace: options of %s: %w", path, err)
	}
	return &o, nil
}

// ValidateFile validates one trace file with the options beside it.
func ValidateFile(path string) FileResult {
	res := FileResult{Path: path}
	o, err := OptionsFor(path)
	if err != nil {
		res.Err = err
		return res
	}
	res.Options = o != nil
	f, err := os.Open(path)
	if err != nil {
		res.Err = fmt.Errorf("trace: %w", err)
		return res
	}
	defer f.Close()
	res.Steps, res.Err = Validate(f, o)
	return res
}

// ValidateDir validates every *.ndjson file under dir and writes one line
// per file and a summary to w. It returns the results, and ErrNoTraces when
// there is no trace.
func ValidateDir(dir string, w io.Writer) ([]FileResult, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ndjson") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("trace: %w", err)
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		fmt.Fprintf(w, "trace-check: no traces under %s\n", dir)
		return nil, ErrNoTraces
	}
	var out []FileResult
	bad, steps := 0, 0
	for _, p := range paths {
		r := ValidateFile(p)
		out = append(out, r)
		steps += r.Steps
		opts := "options"
		if !r.Options {
			opts = "no options file: residency, guard and deadlines unchecked"
		}
		if r.Err != nil {
			bad++
			fmt.Fprintf(w, "FAIL %s (%d events, %s): %v\n", p, r.Steps, opts, r.Err)
		} else {
			fmt.Fprintf(w, "ok   %s (%d events, %s)\n", p, r.Steps, opts)
		}
	}
	fmt.Fprintf(w, "trace-check: %d traces, %d events, %d accepted, %d rejected\n", len(out), steps, len(out)-bad, bad)
	return out, nil
}

// WriteOptions writes machine options as the options file of a trace.
func WriteOptions(path string, o core.Options) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}
