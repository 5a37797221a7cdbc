package conformance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/engines"
)

// Real engines for the cases whose server.engines names them (CONTRACT.md
// "Validation by area": what only a real engine shows, such as a one-slot
// engine refusing slots=2 over HTTP). In process the runner registers them
// beside the fixture, as `sluice serve` does; a binary serves them itself.

// isRealEngine reports whether name is one of the real engines.
func isRealEngine(name string) bool {
	_, ok := engines.Registry(engines.Config{})[name]
	return ok
}

// errUnavailable marks a case whose real engines or models root this
// machine lacks: the case is skipped, not failed.
var errUnavailable = errors.New("unavailable here")

// realEngines returns the named real engines, or an error wrapping
// errUnavailable when one's native library does not load.
func realEngines(names []string) (backends.Registry, error) {
	if len(names) == 0 {
		return nil, nil
	}
	all := engines.Registry(engines.Config{ONNXRuntime: os.Getenv("SLUICE_ONNXRUNTIME")})
	reg := backends.Registry{}
	for _, n := range names {
		if !isRealEngine(n) {
			return nil, fmt.Errorf("conformance: unknown real engine %q", n)
		}
		if err := engines.Available(n); err != nil {
			return nil, fmt.Errorf("conformance: engine %s: %w (%w)", n, errUnavailable, err)
		}
		reg[n] = all[n]
	}
	return reg, nil
}

// ModelsRootEnv names the environment variable that gives the runner the
// real engines' models root (default: ./models, as `make models` builds it).
const ModelsRootEnv = "SLUICE_MODELS_ROOT"

// DefaultModelsRoot returns $SLUICE_MODELS_ROOT, else the first of dirs
// that exists (absolute), else "".
func DefaultModelsRoot(dirs ...string) string {
	if v := os.Getenv(ModelsRootEnv); v != "" {
		return v
	}
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			if abs, err := filepath.Abs(d); err == nil {
				return abs
			}
		}
	}
	return ""
}

// checkModelsRoot reports, wrapping errUnavailable, why a case that needs
// the real engines cannot run with root.
func checkModelsRoot(root string) error {
	if root == "" {
		return fmt.Errorf("conformance: the real engines need a models root (`make models`; --models-root or $%s): %w", ModelsRootEnv, errUnavailable)
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return fmt.Errorf("conformance: models root %s: %w", root, errUnavailable)
	}
	return nil
}
