package sherpa

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// Name is the engine name model specs use.
const Name = "sherpa"

// Options are a sherpa checkpoint's engine options (its manifest's
// options, overridden by the spec's).
type Options struct {
	// Family selects the engine mode (families.go): vits, nemo-ctc, ...
	Family string `json:"family"`
	// Files, relative to the checkpoint; which ones a family needs is in
	// its table.
	Model   string `json:"model,omitempty"`
	Tokens  string `json:"tokens,omitempty"`
	DataDir string `json:"data_dir,omitempty"` // espeak-ng-data (Piper, Kokoro)
	Voices  string `json:"voices,omitempty"`   // Kokoro's voices.bin (style vectors)
	// AcousticModel and Vocoder are Matcha's two models.
	AcousticModel string `json:"acoustic_model,omitempty"`
	// Preprocessor, UncachedDecoder and CachedDecoder are Moonshine's
	// (with Encoder).
	Preprocessor    string `json:"preprocessor,omitempty"`
	UncachedDecoder string `json:"uncached_decoder,omitempty"`
	CachedDecoder   string `json:"cached_decoder,omitempty"`
	// Lexicon lists a multi-language Kokoro's lexicon files (comma
	// separated, e.g. lexicon-us-en.txt,lexicon-zh.txt), and Lang its
	// default espeak-ng voice (default: the model's metadata voice); each
	// speaker speaks the language its name's first letter names (Kokoro's
	// convention: a en-us, b en, e es, f fr, h hi, i it, j ja, p pt-br,
	// z cmn) where data_dir has that voice.
	Lexicon string `json:"lexicon,omitempty"`
	Lang    string `json:"lang,omitempty"`
	// DecodingMethod is a transducer's search: greedy_search (default)
	// or modified_beam_search (4 active paths), which takes a request's
	// hotwords, scored HotwordsScore (default 1.5) each token.
	DecodingMethod string  `json:"decoding_method,omitempty"`
	HotwordsScore  float64 `json:"hotwords_score,omitempty"`
	// BpeVocab is a BPE transducer's piece vocabulary (bpe.vocab: one
	// "piece score" per line, as sherpa-onnx's export_bpe_vocab.py
	// writes it from bpe.model), and ModelingUnit how hotwords are split
	// into tokens: cjkchar (the default without bpe_vocab), bpe (the
	// default with it) or cjkchar+bpe (bpe.go).
	BpeVocab     string `json:"bpe_vocab,omitempty"`
	ModelingUnit string `json:"modeling_unit,omitempty"`
	// MergedDecoder is Moonshine v2's decoder (with Encoder).
	MergedDecoder string `json:"merged_decoder,omitempty"`
	// Segmentation and Embedding are a diarization checkpoint's pyannote
	// segmentation model and speaker embedding extractor.
	Segmentation string `json:"segmentation,omitempty"`
	Embedding    string `json:"embedding,omitempty"`
	// Threshold is the clustering's distance threshold when a request
	// fixes no speaker count (default 0.5); MinDurationOn and
	// MinDurationOff drop shorter turns and bridge shorter gaps (seconds,
	// defaults 0.3 and 0.5).
	Threshold      float64 `json:"threshold,omitempty"`
	MinDurationOn  float64 `json:"min_duration_on,omitempty"`
	MinDurationOff float64 `json:"min_duration_off,omitempty"`
	Vocoder        string  `json:"vocoder,omitempty"`
	Encoder        string  `json:"encoder,omitempty"`
	Decoder        string  `json:"decoder,omitempty"`
	Joiner         string  `json:"joiner,omitempty"`
	// ModelType is passed to the recognizer (e.g. nemo_transducer for
	// Parakeet TDT); "" lets the library read it from the model.
	ModelType string `json:"model_type,omitempty"`
	// Language is the default language of SenseVoice (auto, the
	// default: the model detects it; zh, en, ja, ko, yue), Whisper (auto
	// for a multilingual model, or one of its language codes) and Canary
	// (en, es, de, fr). A request naming another of the model's
	// languages is served by a recognizer created for it (langs.go).
	Language string `json:"language,omitempty"`
	// Threads is ONNX Runtime's intra-op threads per slot (1..16, default
	// 1): slots run in parallel, each on its own threads.
	Threads int `json:"threads,omitempty"`
	// Speakers names a multi-speaker voice's speaker IDs in order (voice
	// names in /v1/audio/voices and requests); default speaker-0, ...
	Speakers []string `json:"speakers,omitempty"`
	// NoiseScale, NoiseScaleW and LengthScale are VITS's sampling
	// scales (defaults 0.667, 0.8, 1); a request's speed divides the
	// length scale.
	NoiseScale  float64 `json:"noise_scale,omitempty"`
	NoiseScaleW float64 `json:"noise_scale_w,omitempty"`
	LengthScale float64 `json:"length_scale,omitempty"`
	// MaxSeconds bounds an ASR request's audio (1..3600, default 600).
	MaxSeconds int `json:"max_seconds,omitempty"`
	// Oversubscribe admits the manifest's max_slots even where slots x
	// threads exceed the cores (benchmarks and the matched-output check).
	Oversubscribe bool `json:"oversubscribe,omitempty"`

	maxSecondsSet bool
}

// Config configures the engine.
type Config struct {
	_ struct{}
	// MaxModelBytes bounds the checkpoint's files together (default
	// 4 GiB): a larger one is refused before any file is read.
	MaxModelBytes int64
	// NoChild skips the load in a child process before the first
	// in-process load of a checkpoint (see child.go); tests of the child
	// itself use it.
	NoChild bool
}

// Engine is the sherpa-onnx engine.
type Engine struct{ cfg Config }

// New returns the engine.
func New(c Config) *Engine {
	if c.MaxModelBytes <= 0 {
		c.MaxModelBytes = 4 << 30
	}
	return &Engine{cfg: c}
}

// Name implements backends.Engine.
func (e *Engine) Name() string { return Name }

// config is a resolved, checked spec.
type config struct {
	name     string
	dir      string
	fam      family
	opts     Options
	files    map[string]string // option key -> absolute path
	infos    map[string]onnxInfo
	nTokens  int
	rate     int // the model's sample rate (TTS output)
	speakers int
	// voiceLangs is each speaker's espeak-ng voice (multi-language
	// Kokoro; nil otherwise).
	voiceLangs []string
	capacity   int
	bytes      int64
	// langs are the languages a recognizer can be created for (option
	// language: SenseVoice, Whisper, Canary; nil for the others), the
	// languages a request may name (langs.go).
	langs []string
	// bpe is option bpe_vocab's vocabulary (nil without it) and unit the
	// modeling unit hotwords are split by (bpe.go).
	bpe  *bpeVocab
	unit string
}

func (e *Engine) resolve(spec backends.Spec) (config, error) {
	// Sizes first, from the manifest alone: a huge (for example sparse)
	// file is refused before the catalogue hashes it.
	if err := e.checkSizes(spec.Checkpoint); err != nil {
		return config{}, err
	}
	var o Options
	var probe struct {
		Family string `json:"family"`
	}
	if cp, err := catalogue.Load(spec.Checkpoint); err == nil {
		merged, _ := catalogue.MergeOptions(cp.Options, spec.Options)
		_ = json.Unmarshal(merged, &probe)
	}
	fam, err := familyOf(probe.Family)
	if err != nil {
		return config{}, err
	}
	if spec.Task != fam.task {
		return config{}, backends.Invalidf("sherpa: family %s serves task %s, the model is task %s", fam.name, fam.task, spec.Task)
	}
	cp, err := catalogue.EngineOptions(spec, Name, fam.task, &o)
	if err != nil {
		return config{}, err
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	o.maxSecondsSet = o.MaxSeconds != 0
	if o.MaxSeconds == 0 {
		o.MaxSeconds = 600
	}
	if o.NoiseScale == 0 {
		o.NoiseScale = 0.667
	}
	if o.NoiseScaleW == 0 {
		o.NoiseScaleW = 0.8
	}
	if o.LengthScale == 0 {
		o.LengthScale = 1
	}
	switch {
	case o.Threads < 1 || o.Threads > 16:
		return config{}, backends.Invalidf("sherpa: threads %d outside 1..16", o.Threads)
	case o.MaxSeconds < 1 || o.MaxSeconds > 3600:
		return config{}, backends.Invalidf("sherpa: max_seconds %d outside 1..3600", o.MaxSeconds)
	case o.NoiseScale < 0 || o.NoiseScale > 2 || o.NoiseScaleW < 0 || o.NoiseScaleW > 2 || o.LengthScale < 0.1 || o.LengthScale > 10:
		return config{}, backends.Invalidf("sherpa: noise_scale, noise_scale_w in 0..2 and length_scale in 0.1..10")
	}
	c := config{name: cp.Name, dir: cp.Dir, fam: fam, opts: o, files: map[string]string{}, infos: map[string]onnxInfo{}}
	named := map[string]string{"segmentation": o.Segmentation, "embedding": o.Embedding, "preprocessor": o.Preprocessor, "uncached_decoder": o.UncachedDecoder, "cached_decoder": o.CachedDecoder, "merged_decoder": o.MergedDecoder, "acoustic_model": o.AcousticModel, "vocoder": o.Vocoder, "voices": o.Voices, "model": o.Model, "tokens": o.Tokens, "encoder": o.Encoder, "decoder": o.Decoder, "joiner": o.Joiner}
	for _, k := range fam.files {
		if named[k] == "" {
			return config{}, backends.Invalidf("sherpa: family %s needs option %s (a file of the checkpoint)", fam.name, k)
		}
		p, err := cp.File(named[k])
		if err != nil {
			return config{}, fmt.Errorf("sherpa: option %s: %w", k, err)
		}
		c.files[k] = p
	}
	for k, req := range fam.onnx {
		info, err := readONNX(c.files[k], e.cfg.MaxModelBytes)
		if err != nil {
			return config{}, fmt.Errorf("sherpa: option %s: %w", k, err)
		}
		if err := req.check(named[k], info); err != nil {
			return config{}, err
		}
		c.infos[k] = info
		c.bytes += info.Bytes
	}
	if fam.tokens != "" {
		if c.nTokens, err = checkTokens(c.files["tokens"], fam.tokens); err != nil {
			return config{}, err
		}
	}
	if o.DataDir != "" {
		p, err := cp.File(o.DataDir)
		if err != nil {
			return config{}, fmt.Errorf("sherpa: option data_dir: %w", err)
		}
		if st, err := os.Stat(filepath.Join(p, "phontab")); err != nil || !st.Mode().IsRegular() {
			return config{}, backends.Invalidf("sherpa: data_dir %s is not an espeak-ng-data folder (no phontab)", o.DataDir)
		}
		c.files["data_dir"] = p
	}
	if o.BpeVocab != "" {
		p, err := cp.File(o.BpeVocab)
		if err != nil {
			return config{}, fmt.Errorf("sherpa: option bpe_vocab: %w", err)
		}
		if c.bpe, err = readBpeVocab(p); err != nil {
			return config{}, err
		}
		c.files["bpe_vocab"] = p
	}
	if err := c.checkFamily(); err != nil {
		return config{}, err
	}
	c.capacity = cp.Parallel.MaxSlots
	if !o.Oversubscribe {
		c.capacity = max(1, min(c.capacity, runtime.NumCPU()/o.Threads))
	}
	return c, nil
}

func hasInput(info onnxInfo, n string) bool {
	for _, x := range info.Inputs {
		if x == n {
			return true
		}
	}
	return false
}

// checkSizes refuses a checkpoint whose manifest lists files larger, in
// all, than the engine may load, before any of them is hashed or read.
func (e *Engine) checkSizes(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, catalogue.ManifestName))
	if err != nil {
		return nil // catalogue.Load reports it
	}
	m, err := catalogue.ParseManifest(b)
	if err != nil {
		return nil
	}
	var total int64
	for _, f := range m.Files {
		total += f.Size
		if f.Size > e.cfg.MaxModelBytes || total > e.cfg.MaxModelBytes {
			return backends.Invalidf("sherpa: checkpoint %s: its files are more than %d bytes (file %s is %d bytes)", m.Name, e.cfg.MaxModelBytes, f.Path, f.Size)
		}
		// A sparse file reports a size its blocks do not back; the
		// manifest's size then lies about nothing, but the hash would read
		// gigabytes of zeros. Compare with the allocated blocks.
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path))); err == nil && sparse(st) {
			return backends.Invalidf("sherpa: checkpoint %s: file %s is sparse (%d bytes, far fewer allocated): refused", m.Name, f.Path, st.Size())
		}
	}
	return nil
}

// Validate implements backends.Engine: Check without its estimate.
func (e *Engine) Validate(spec backends.Spec) error {
	_, err := e.Check(spec)
	return err
}

// Check implements backends.Engine, from one resolve of the spec: the
// slot count against the checkpoint's capacity, the library, and the load
// in a child process; the estimate is the model's weights once (the slots
// share one library object), ONNX Runtime's arena and the library's
// per-call buffers per slot.
func (e *Engine) Check(spec backends.Spec) (int64, error) {
	c, err := e.resolve(spec)
	if err != nil {
		return 0, err
	}
	if spec.Slots < 1 || spec.Slots > c.capacity {
		return 0, backends.Invalidf("sherpa: checkpoint %s admits 1..%d slots at %d threads each on %d cores, asked for %d", c.name, c.capacity, c.opts.Threads, runtime.NumCPU(), spec.Slots)
	}
	if err := Available(); err != nil {
		return 0, err
	}
	// The load in a child process (child.go) belongs to validation: a
	// checkpoint that kills the library is refused at registration, as
	// invalid, not at its first load. A checkpoint that passed is
	// remembered, so this costs one child per checkpoint and options.
	if !e.cfg.NoChild {
		if err := childCheck(context.Background(), spec, c); err != nil {
			return 0, err
		}
	}
	// A language family's slot may hold maxLangs more recognizers, each
	// its own copy of the weights (langs.go).
	extra := int64(0)
	if len(c.langs) > 1 {
		extra = maxLangs * (8 + 2*(c.bytes>>20))
	}
	if c.fam.perSlot {
		return backends.LinearMB(40, 8+2*(c.bytes>>20)+extra, spec.Slots), nil
	}
	return backends.LinearMB(40+2*(c.bytes>>20), 8+extra, spec.Slots), nil
}

// Probe implements backends.Engine: a real open (in the child first) and
// close.
func (e *Engine) Probe(ctx context.Context, spec backends.Spec) (int, error) {
	return backends.ProbeByOpening(ctx, spec, e.Open)
}

// Voices implements backends.VoiceLister for TTS families: one voice per
// speaker, from the model's metadata.
func (e *Engine) Voices(spec backends.Spec) ([]backends.Voice, error) {
	c, err := e.resolve(spec)
	if err != nil {
		return nil, err
	}
	if c.fam.task != "tts" {
		return nil, backends.Invalidf("sherpa: checkpoint %s is not a speech model", c.name)
	}
	meta := c.infos["model"].Meta
	if c.fam.name == FamilyMatcha {
		meta = c.infos["acoustic_model"].Meta
	}
	lang := meta["voice"] // espeak's voice: en-us
	if lang == "" {
		lang = meta["language"]
	}
	var out []backends.Voice
	for i := range c.speakers {
		l := lang
		if i < len(c.voiceLangs) {
			l = c.voiceLangs[i]
		}
		out = append(out, backends.Voice{ID: c.speakerName(i), Languages: []string{l}, SampleRate: c.rate, Default: i == 0})
	}
	return out, nil
}

func (c *config) speakerName(i int) string {
	if len(c.opts.Speakers) > 0 {
		return c.opts.Speakers[i]
	}
	if c.speakers == 1 {
		return c.name
	}
	return "speaker-" + strconv.Itoa(i)
}
