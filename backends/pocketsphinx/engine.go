// Package pocketsphinx is the CMU PocketSphinx speech recognition engine
// (Debian libpocketsphinx3 with the pocketsphinx-en-us model), loaded with
// purego. A decoder is not thread-safe, so every session owns one; sessions
// decode in parallel.
//
// Requests: see backends/audio (ASR). Body or Data is a WAV file (any rate,
// resampled to 16 kHz) or raw PCM16LE mono at Input's declared sample_rate
// (required for raw PCM), read with audio.DecodeInput; Input's language,
// when given, must be the model's. The output is an audio.ASRResult: text,
// duration, language, and the words with their times from the decoder's
// word segmentation (ps_seg_iter; fillers and silences left out), grouped
// into segments at pauses (audio.Segments). The audio is decoded as
// utterances cut at its pauses (endpoint.go); with Request.Stream each
// goes out as an audio.TranscriptDelta as soon as it ended, and the
// deltas concatenate to the result's text, which is the same streamed or
// not.
//
// Checkpoints: a catalogue folder whose manifest names engine
// "pocketsphinx"; options hmm (acoustic model folder), lm (language model),
// dict (dictionary), all relative to the checkpoint, language (its
// ISO-639-1 code, default "en"), and max_seconds (the
// longest accepted audio, 1..3600, default 300, checked against the WAV
// header before decoding). Validate checks every file (hash
// via the catalogue, then each format's magic) before the library reads it,
// because sphinxbase aborts the process on some malformed models.
//
// Threading rule: the Engine is safe for concurrent use; a session is used
// by one goroutine at a time. Decoder construction is serialised.
package pocketsphinx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Name is the engine name model specs use.
const Name = "pocketsphinx"

// SampleRate is the rate the en-us acoustic model expects.
const SampleRate = 16000

// ParallelAdmission returns the slot ceiling of a checkpoint (by manifest
// name): one decoder per session shares nothing mutable, so the default
// model admits the contract's maximum, 16; any other checkpoint 0 (one slot).
func ParallelAdmission(name string) int {
	if name == catalogue.PocketsphinxEnUS {
		return 16
	}
	return 0
}

// Memory estimate: each decoder holds its own copy of the acoustic model,
// language model and dictionary (measured 96 MB resident per decoder for
// en-us).
const (
	baseMB    = 8
	perSlotMB = 100
)

// Options are the engine options of a pocketsphinx model.
type Options struct {
	HMM        string `json:"hmm"`
	LM         string `json:"lm"`
	Dict       string `json:"dict"`
	MaxSeconds int    `json:"max_seconds,omitempty"`
	// CostPerSecond is the checkpoint's declared decoding cost on real
	// speech, in CPU-seconds per audio second (0 = 1.0), and CostFactor
	// the multiple of it a request may spend (0 = 2) on top of a 5 CPU-s
	// floor before the decode stops with ErrCostBudget (CONTRACT.md E2).
	CostPerSecond float64 `json:"cost_per_second,omitempty"`
	CostFactor    float64 `json:"cost_factor,omitempty"`
	// Language is the ISO-639-1 code of the model's language ("" = "en":
	// the Debian models are US English).
	Language string `json:"language,omitempty"`
}

// Engine is the pocketsphinx engine.
type Engine struct{}

// New returns the pocketsphinx engine.
func New() *Engine { return &Engine{} }

// Available reports whether the libraries can be loaded.
func Available() error {
	_, err := load()
	return err
}

// Name implements backends.Engine.
func (e *Engine) Name() string { return Name }

type config struct {
	name       string
	hmm, lm    string // absolute paths
	dict       string
	maxSeconds int
	maxSlots   int

	costPerSecond, costFactor float64 // see Options
	language                  string
}

// resolve checks spec and every model file without the library.
func resolve(spec backends.Spec) (config, error) {
	var o Options
	cp, err := catalogue.EngineOptions(spec, Name, "asr", &o)
	if err != nil {
		return config{}, err
	}
	if o.MaxSeconds == 0 {
		o.MaxSeconds = 300
	}
	if o.MaxSeconds < 1 || o.MaxSeconds > 3600 {
		return config{}, backends.Invalidf("pocketsphinx: max_seconds %d outside 1..3600", o.MaxSeconds)
	}
	if o.Language == "" {
		o.Language = "en"
	}
	if o.CostPerSecond == 0 {
		o.CostPerSecond = defaultCostPerSecond
	}
	if o.CostFactor == 0 {
		o.CostFactor = defaultCostFactor
	}
	if !(o.CostPerSecond > 0 && o.CostPerSecond <= 100) || !(o.CostFactor >= 1 && o.CostFactor <= 1000) {
		return config{}, backends.Invalidf("pocketsphinx: cost_per_second %g outside (0, 100] or cost_factor %g outside 1..1000", o.CostPerSecond, o.CostFactor)
	}
	if len(o.Language) != 2 || strings.ToLower(o.Language) != o.Language {
		return config{}, backends.Invalidf("pocketsphinx: language %q is not an ISO-639-1 code", o.Language)
	}
	c := config{name: cp.Name, maxSeconds: o.MaxSeconds, maxSlots: min(cp.Parallel.MaxSlots, max(1, ParallelAdmission(cp.Name))), language: o.Language,
		costPerSecond: o.CostPerSecond, costFactor: o.CostFactor}
	for _, f := range []struct {
		rel string
		dst *string
	}{{o.HMM, &c.hmm}, {o.LM, &c.lm}, {o.Dict, &c.dict}} {
		if f.rel == "" {
			return config{}, backends.Invalidf("pocketsphinx: options hmm, lm and dict are required")
		}
		p, err := cp.File(f.rel)
		if err != nil {
			return config{}, fmt.Errorf("pocketsphinx: %w", err)
		}
		*f.dst = p
	}
	if err := checkModel(c); err != nil {
		return config{}, err
	}
	return c, nil
}

// checkModel checks the model files' formats, so that a wrong or damaged
// file is a clear error instead of a decoder that aborts the process.
func checkModel(c config) error {
	checks := []struct {
		path  string
		magic []string
	}{
		{c.hmm + "/mdef", []string{"BMDF", "0.3\n"}},
		{c.hmm + "/means", []string{"s3\n"}},
		{c.hmm + "/variances", []string{"s3\n"}},
		{c.hmm + "/transition_matrices", []string{"s3\n"}},
		{c.hmm + "/feat.params", nil},
		{c.hmm + "/noisedict", nil},
		{c.lm, []string{"Trie Language Model", "Darpa Trigram LM", "\\data\\", "\n\\data\\"}},
		{c.dict, nil},
	}
	for _, ch := range checks {
		st, err := os.Stat(ch.path)
		if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
			return backends.Invalidf("pocketsphinx: model file %s is missing or empty", ch.path)
		}
		if ch.magic == nil {
			continue
		}
		head := make([]byte, 32)
		fh, err := os.Open(ch.path)
		if err != nil {
			return backends.Invalidf("pocketsphinx: %v", err)
		}
		n, _ := fh.Read(head)
		fh.Close()
		ok := false
		for _, m := range ch.magic {
			ok = ok || bytes.HasPrefix(head[:n], []byte(m))
		}
		if !ok {
			return backends.Invalidf("pocketsphinx: %s does not look like a %s file (bad header)", ch.path, strings.TrimSuffix(ch.magic[0], "\n"))
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
// slot count and the library.
func (e *Engine) Check(spec backends.Spec) (int64, error) {
	c, err := resolve(spec)
	if err != nil {
		return 0, err
	}
	if spec.Slots < 1 || spec.Slots > c.maxSlots {
		return 0, backends.Invalidf("pocketsphinx: checkpoint %s admits 1..%d slots, asked for %d", c.name, c.maxSlots, spec.Slots)
	}
	if err := Available(); err != nil {
		return 0, err
	}
	return backends.LinearMB(baseMB, perSlotMB, spec.Slots), nil
}

// Open implements backends.Engine.
func (e *Engine) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	c, err := resolve(spec)
	if err != nil {
		return nil, 0, err
	}
	// engine.load-safety: a model's first load runs in a child (child.go).
	if err := childCheck(ctx, spec, c); err != nil {
		return nil, 0, err
	}
	s, err := newSession(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	return s, c.maxSlots, nil
}

// Probe implements backends.Engine. It builds a real decoder, so a model
// the library rejects fails the probe.
func (e *Engine) Probe(ctx context.Context, spec backends.Spec) (int, error) {
	return backends.ProbeByOpening(ctx, spec, e.Open)
}

// session is one slot: a private decoder.
type session struct {
	lib   *lib
	cfg   config
	ps    unsafe.Pointer
	score unsafe.Pointer // C int32 out-parameter of ps_get_hyp
	cmn   cmnState       // the fresh decoder's CMN (cmn.go)
}

func newSession(ctx context.Context, c config) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, err := load()
	if err != nil {
		return nil, err
	}
	ps := l.newDecoder(c.argv())
	if ps == nil {
		return nil, backends.Invalidf("pocketsphinx: the decoder rejected checkpoint %s (its files passed validation; check the model's feat.params and formats)", c.name)
	}
	return &session{lib: l, cfg: c, ps: ps, score: native.Malloc(8), cmn: l.snapshotCMN(ps)}, nil
}

// argv is the decoder's configuration as command-line arguments.
func (c config) argv() []string {
	return []string{"-hmm", c.hmm, "-lm", c.lm, "-dict", c.dict}
}

// Clone implements backends.Session.
func (s *session) Clone(ctx context.Context, index int) (backends.Session, error) {
	if index < 1 || index >= s.cfg.maxSlots {
		return nil, backends.Invalidf("pocketsphinx: checkpoint %s admits %d slots, cannot clone session %d", s.cfg.name, s.cfg.maxSlots, index)
	}
	return newSession(ctx, s.cfg)
}

// Infer implements backends.Session. The decode stops between pieces of
// a quarter second of audio when ctx ends or the cost budget is spent (see
// decode).
func (s *session) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if s.ps == nil {
		return backends.Output{}, fmt.Errorf("pocketsphinx: session is closed")
	}
	if req.Live != nil {
		return s.live(ctx, req, emit)
	}
	var r audio.AudioRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	if err := r.CheckPlain("pocketsphinx"); err != nil {
		return backends.Output{}, err
	}
	lang, err := audio.CheckLanguage(r.Language, []string{s.cfg.language})
	if err != nil {
		return backends.Output{}, fmt.Errorf("pocketsphinx: %w", err)
	}
	// audio.duration-limit: max_seconds is checked against the header
	// before decoding; decoding stops when ctx ends.
	a, err := audio.DecodeInput(ctx, req, audio.Want{Rate: SampleRate, MaxSeconds: float64(s.cfg.maxSeconds), RawRate: r.SampleRate})
	if err != nil {
		return backends.Output{}, fmt.Errorf("pocketsphinx: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return backends.Output{}, err
	}
	dur := round3(a.Seconds())
	// With Request.Stream each utterance goes out as an
	// audio.TranscriptDelta once it ended (endpoint.go): the deltas
	// concatenate to the transcript, which is the same bytes streamed or
	// not.
	stream := req.Stream && emit != nil
	var sink func(utterance) error
	if stream {
		said := false
		sink = func(u utterance) error {
			d := audio.TranscriptDelta{Delta: u.text}
			if n := len(u.words); n > 0 {
				d.Start, d.End = u.words[0].Start, u.words[n-1].End
			}
			if said {
				d.Delta = " " + d.Delta
			}
			said = true
			b, err := json.Marshal(d)
			if err != nil {
				return err
			}
			return emit(b)
		}
	}
	text, words, err := s.decode(ctx, a.Samples, dur, sink)
	if err != nil {
		return backends.Output{}, err
	}
	b, err := json.Marshal(audio.ASRResult{Text: text, Duration: dur, Language: lang, Streamed: stream, Segments: audio.Segments(words), Words: words})
	if err != nil {
		return backends.Output{}, err
	}
	if stream {
		if err := emit(b); err != nil {
			return backends.Output{}, err
		}
	}
	return backends.Output{JSON: b}, nil
}

// frameRate is the decoder's frames per second (its default -frate).
const frameRate = 100

// abort ends a decode that stopped with err (its context ended, its
// budget was spent) without the utterance's second pass (abort.go), and
// returns err.
func (s *session) abort(err error) error {
	if !s.abortUtt(false) {
		return fmt.Errorf("%w (and the decoder could not be rebuilt: the session is closed)", err)
	}
	return err
}

// words walks the last utterance's segmentation.
// Its frames count from the start of the stream (ps_start_stream), not of
// the utterance, so an upload's utterances need no offset.
func (s *session) words(seconds float64) []audio.Word {
	l := s.lib
	frames := native.Malloc(8)
	defer native.Free(frames)
	sf, ef := frames, unsafe.Add(frames, 4)
	var out []audio.Word
	for seg := l.segIter(s.ps, s.score); seg != nil; seg = l.segNext(seg) {
		w := wordOf(native.GoString(l.segWord(seg)))
		if w == "" {
			continue
		}
		l.segFrames(seg, sf, ef)
		start := min(round3(float64(*(*int32)(sf))/frameRate), seconds)
		end := min(round3(float64(*(*int32)(ef)+1)/frameRate), seconds)
		if n := len(out); n > 0 && start < out[n-1].End {
			start = out[n-1].End
		}
		out = append(out, audio.Word{Word: w, Start: start, End: max(start, end)})
	}
	return out
}

// wordOf is a segment's dictionary word as text: "" for silences and
// fillers (<s>, </s>, <sil>, [NOISE], ++BREATH++), and without the
// alternate-pronunciation suffix ("read(2)" is "read").
func wordOf(w string) string {
	if w == "" || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "[") || strings.HasPrefix(w, "++") {
		return ""
	}
	if i := strings.IndexByte(w, '('); i > 0 && strings.HasSuffix(w, ")") {
		w = w[:i]
	}
	return w
}

// Close implements backends.Session.
func (s *session) Close(ctx context.Context) error {
	if s.ps != nil {
		s.lib.freePS(s.ps)
		native.Free(s.score)
		s.cmn.free()
		s.ps, s.score = nil, nil
		native.TrimHeap() // give the freed decoder's pages back (E5)
	}
	return nil
}

func round3(x float64) float64 {
	return float64(int64(x*1000+0.5)) / 1000
}
