// Command sluice-models builds the default models root (`make models`):
// flite-slt, pocketsphinx-en-us, silero-v5 and espeak-en, copied from the
// Debian packages and the npm prefix that `make deps` installs. Running it
// again changes nothing when nothing changed. It then scans the root and
// prints the catalogue. -whisper adds the synthetic Whisper checkpoints
// (backends/whisper.SyntheticRecipes, tiny dims: meaningless transcripts;
// f16, f32, 128 mel bands, and q4_0, q4_1, q5_0, q5_1, q8_0 written by
// whisper.cpp's quantize tool, which make deps builds) to the root; it is
// not a default, since a root is scanned whole and a server without the
// whisper engine would refuse a root that holds it. -sherpa builds only
// the synthetic sherpa-onnx checkpoints (backends/sherpa: Piper voices,
// recognizers; seeded random weights, generated with Debian's
// python3-onnx) into -root, a root of their own (make models:
// models-sherpa). -import DIR writes the manifest of a folder in
// sherpa-onnx's release layout (see backends/sherpa.Import).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/backends/whisper"
)

func main() {
	root := flag.String("root", "models", "models root to build")
	npm := flag.String("npm", "", "npm prefix holding node_modules (default $SLUICE_NPM_PREFIX or <module>/.deps/npm)")
	withWhisper := flag.Bool("whisper", false, "also build the synthetic Whisper checkpoints "+whisperName+"[-f32|-128mel|-q4_0|-q4_1|-q5_0|-q5_1|-q8_0]")
	withSherpa := flag.Bool("sherpa", false, "build only the synthetic sherpa-onnx checkpoints into -root")
	importDir := flag.String("import", "", "write the manifest of `DIR`, a sherpa-onnx model folder in its release layout (family detected from its files), and exit")
	importName := flag.String("name", "", "with -import: the checkpoint name (default: the folder's name, which a models root requires)")
	flag.Parse()
	if *importDir != "" {
		m, err := sherpa.Import(*importDir, *importName, catalogue.MaxSlots)
		if err != nil {
			slog.Error("sluice-models", "err", err)
			os.Exit(1)
		}
		fmt.Printf("%s: wrote %s: task=%s engine=%s options=%s files=%d\n", *importDir, catalogue.ManifestName, m.Task, m.Engine, m.Options, len(m.Files))
		return
	}
	if *withSherpa {
		if err := sherpa.BuildSynthetic(*root, catalogue.DefaultSources(*npm), catalogue.MaxSlots, sherpa.SyntheticNames...); err != nil {
			slog.Error("sluice-models", "err", err)
			os.Exit(1)
		}
		if err := list(*root); err != nil {
			slog.Error("sluice-models", "err", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*root, *npm, *withWhisper); err != nil {
		slog.Error("sluice-models", "err", err)
		os.Exit(1)
	}
}

// whisperName is the synthetic Whisper checkpoint's folder.
const whisperName = "whisper-synthetic-tiny"

func run(root, npm string, withWhisper bool) error {
	recipes, err := catalogue.Defaults(catalogue.DefaultSources(npm))
	if err != nil {
		return fmt.Errorf("%w (run `make deps` first)", err)
	}
	if withWhisper {
		rs, err := whisper.SyntheticRecipes(whisperName, catalogue.MaxSlots)
		if err != nil {
			return err
		}
		recipes = append(recipes, rs...)
	}
	rep, err := catalogue.Build(root, recipes)
	if err != nil {
		return err
	}
	fmt.Printf("models root %s: %d files copied, %d kept; %d manifests written, %d current\n",
		root, rep.Copied, rep.Kept, rep.Written, rep.Current)
	return list(root)
}

// list scans root and prints its catalogue.
func list(root string) error {
	cat, err := catalogue.Scan(root, catalogue.ScanOptions{})
	if err != nil {
		return err
	}
	for _, n := range cat.Names() {
		cp, _ := cat.Get(n)
		fmt.Printf("  %-20s task=%-4s engine=%-13s files=%-2d max_slots=%d\n", n, cp.Task, cp.Engine, len(cp.Files), cp.Parallel.MaxSlots)
	}
	return nil
}
