package engines

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/espeak"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
)

// The test binary's models root: SLUICE_MODELS_ROOT, else the defaults
// built from the installed packages into a temporary folder.
var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
	tmpRoot  string

	inputsOnce sync.Once
	inputs     map[string][]backends.Request
	inputsErr  error
)

func TestMain(m *testing.M) {
	if env := os.Getenv(malformedChildEnv); env != "" {
		os.Exit(malformedChild(env)) // a child of TestMalformedCheckpoints
	}
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

// available is nil when every engine loads.
func available() error {
	return errors.Join(flite.Available(), pocketsphinx.Available(), espeak.Available(), onnx.Available())
}

// modelsRoot returns the root, skipping the test when the engines or their
// packages are not installed (failing under SLUICE_REQUIRE_ENGINES).
func modelsRoot(t testing.TB) string {
	t.Helper()
	native.SkipUnavailable(t, available())
	rootOnce.Do(func() {
		if rootDir = os.Getenv("SLUICE_MODELS_ROOT"); rootDir != "" {
			return
		}
		recipes, err := catalogue.Defaults(catalogue.DefaultSources(""))
		if err != nil {
			rootErr = err
			return
		}
		if tmpRoot, err = os.MkdirTemp("", "sluice-models-"); err != nil {
			rootErr = err
			return
		}
		rootDir = tmpRoot
		_, rootErr = catalogue.Build(rootDir, recipes)
	})
	if errors.Is(rootErr, catalogue.ErrMissingSource) {
		native.SkipUnavailable(t, rootErr)
	}
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return rootDir
}

func standardInputs(t testing.TB) map[string][]backends.Request {
	t.Helper()
	inputsOnce.Do(func() { inputs, inputsErr = Inputs(context.Background(), catalogue.DefaultSources("")) })
	if inputsErr != nil {
		t.Fatal(inputsErr)
	}
	return inputs
}

func scan(t testing.TB) (*catalogue.Catalogue, backends.Registry) {
	t.Helper()
	reg := Registry(Config{})
	cat, err := ScanRoot(modelsRoot(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	return cat, reg
}

func ids(reqs []backends.Request) string {
	s := ""
	for _, r := range reqs {
		s += fmt.Sprint(r.ID, " ")
	}
	return s
}
