// Package flite is the CMU Flite text-to-speech engine (Debian libflite1),
// loaded with purego. Each session owns an independent voice object, so
// sessions synthesise in parallel; ParallelAdmission lists the voices that
// admit more than one slot.
//
// Requests: see backends/audio (TTS). Input {"text","voice","format",
// "speed","sample_rate"}; the output is WAV (or raw PCM16LE) at the voice's
// rate (16 kHz; kal is 8 kHz) unless sample_rate asks for another. A
// streamed request emits one chunk per sentence.
//
// Checkpoints: a catalogue folder whose manifest names engine "flite"
// (options {"voice": "slt"}), or just a voice name ("slt", "cmu_us_slt").
// Options: voice (slt, awb, rms, kal, kal16) and duration_stretch
// (0.25..4, default 1).
//
// Threading rule: the Engine is safe for concurrent use; a session is used
// by one goroutine at a time. Voice registration is serialised inside the
// package because it writes library globals; synthesis on different
// sessions runs in parallel.
package flite

import (
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
const Name = "flite"

// parallelVoices are the voices that admit more than one slot (up to 16).
// Every voice here was checked with the matched-output test (identical
// bytes at 1, 2 and 4 slots); a voice not listed admits one slot.
var parallelVoices = [...]string{"slt", "awb", "rms", "kal", "kal16"}

// ParallelVoices lists the voices that admit more than one slot.
func ParallelVoices() []string { return append([]string(nil), parallelVoices[:]...) }

// ParallelAdmission returns the slot ceiling of a voice: 16 for the voices
// of ParallelVoices, 0 (one slot) for any other.
func ParallelAdmission(voice string) int {
	for _, v := range parallelVoices {
		if v == voice {
			return 16
		}
	}
	return 0
}

// baseMB and perSlotMB are the resident memory estimates: the voice
// libraries are shared mappings; a voice object and a synthesis's buffers
// measured under 2 MB per session.
const (
	baseMB    = 16
	perSlotMB = 2
)

// Options are the engine options of a flite model.
type Options struct {
	Voice           string  `json:"voice"`
	DurationStretch float64 `json:"duration_stretch,omitempty"`
}

// Engine is the flite engine.
type Engine struct{}

// New returns the flite engine.
func New() *Engine { return &Engine{} }

// Available reports whether libflite can be loaded.
func Available() error {
	_, err := load()
	return err
}

// Name implements backends.Engine.
func (e *Engine) Name() string { return Name }

// config is a resolved spec.
type config struct {
	opts     Options
	maxSlots int
}

// resolve checks everything about spec except the slot count, touching
// only files (never the library).
func resolve(spec backends.Spec) (config, error) {
	if spec.Task != "tts" {
		return config{}, backends.Invalidf("flite: task %q, want tts", spec.Task)
	}
	defaults := json.RawMessage(nil)
	maxSlots := catalogue.MaxSlots
	if isDir(spec.Checkpoint) {
		cp, err := catalogue.Load(spec.Checkpoint)
		if err != nil {
			return config{}, fmt.Errorf("flite: %w", err)
		}
		if cp.Engine != Name || cp.Task != "tts" {
			return config{}, backends.Invalidf("flite: checkpoint %q is for engine %q task %q", cp.Name, cp.Engine, cp.Task)
		}
		defaults, maxSlots = cp.Options, cp.Parallel.MaxSlots
	} else if v := strings.TrimPrefix(spec.Checkpoint, "cmu_us_"); v != "" {
		defaults = json.RawMessage(fmt.Sprintf(`{"voice":%q}`, v))
	}
	merged, err := catalogue.MergeOptions(defaults, spec.Options)
	if err != nil {
		return config{}, fmt.Errorf("flite: %w", err)
	}
	var o Options
	if err := audio.DecodeStrict(merged, &o); err != nil {
		return config{}, fmt.Errorf("flite: options: %w", err)
	}
	if _, ok := Voices[o.Voice]; !ok {
		return config{}, backends.Invalidf("flite: unknown voice %q (have slt, awb, rms, kal, kal16)", o.Voice)
	}
	if o.DurationStretch == 0 {
		o.DurationStretch = 1
	}
	if o.DurationStretch < 0.25 || o.DurationStretch > 4 {
		return config{}, backends.Invalidf("flite: duration_stretch %v outside 0.25..4", o.DurationStretch)
	}
	return config{opts: o, maxSlots: min(maxSlots, max(1, ParallelAdmission(o.Voice)))}, nil
}

// voiceRates are the output rates of Debian's voices: the clustergen
// voices and kal16 synthesise at 16 kHz, the kal diphone voice at 8 kHz.
var voiceRates = map[string]int{"slt": 16000, "awb": 16000, "rms": 16000, "kal": 8000, "kal16": 16000}

// Voices implements backends.VoiceLister: a flite model speaks its one
// voice (OpenAI's stock names are accepted as aliases of it), in US
// English.
func (e *Engine) Voices(spec backends.Spec) ([]backends.Voice, error) {
	c, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	return []backends.Voice{{ID: c.opts.Voice, Languages: []string{"en-us"}, SampleRate: voiceRates[c.opts.Voice], Default: true}}, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// Validate implements backends.Engine: Check without its estimate.
func (e *Engine) Validate(spec backends.Spec) error {
	_, err := e.Check(spec)
	return err
}

// Check implements backends.Engine, from one resolve of the spec: the
// library and the voice's slot ceiling.
func (e *Engine) Check(spec backends.Spec) (int64, error) {
	c, err := resolve(spec)
	if err != nil {
		return 0, err
	}
	l, err := load()
	if err != nil {
		return 0, err
	}
	if n := l.maxSlots(c.opts.Voice, c.maxSlots); spec.Slots < 1 || spec.Slots > n {
		return 0, backends.Invalidf("flite: voice %s admits 1..%d slots, asked for %d", c.opts.Voice, n, spec.Slots)
	}
	return backends.LinearMB(baseMB, perSlotMB, spec.Slots), nil
}

// Open implements backends.Engine: the primary session and the voice's
// slot ceiling as its advertised capacity (contract: counts 1..16, further
// limited by the session's advertised capacity). It does not refuse a spec
// with more slots than that: the runtime compares and fails the load as
// invalid, after Validate has normally refused it first.
func (e *Engine) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	c, err := resolve(spec)
	if err != nil {
		return nil, 0, err
	}
	s, err := newSession(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	c.maxSlots = s.lib.maxSlots(c.opts.Voice, c.maxSlots)
	s.cfg = c
	return s, c.maxSlots, nil
}

// Probe implements backends.Engine.
func (e *Engine) Probe(ctx context.Context, spec backends.Spec) (int, error) {
	return backends.ProbeByOpening(ctx, spec, e.Open)
}

// session is one slot: a private voice object.
type session struct {
	lib    *lib
	cfg    config
	voice  unsafe.Pointer
	stream *stream // nil for voices that stop between sentences only (stream.go)
}

func newSession(ctx context.Context, c config) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, err := load()
	if err != nil {
		return nil, err
	}
	v, err := l.newVoiceObject(c.opts.Voice)
	if err != nil {
		return nil, err
	}
	return &session{lib: l, cfg: c, voice: v, stream: l.attachStream(c.opts.Voice, v)}, nil
}

// Clone implements backends.Session.
func (s *session) Clone(ctx context.Context, index int) (backends.Session, error) {
	if index < 1 || index >= s.cfg.maxSlots {
		return nil, backends.Invalidf("flite: voice %s admits %d slots, cannot clone session %d", s.cfg.opts.Voice, s.cfg.maxSlots, index)
	}
	return newSession(ctx, s.cfg)
}

// Infer implements backends.Session. Cancellation takes effect inside a
// sentence for the clustergen voices (every 0.1 s of audio the vocoder
// makes, stream.go) and between sentences for the others.
func (s *session) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if s.voice == nil {
		return backends.Output{}, fmt.Errorf("flite: session is closed")
	}
	r, err := audio.ParseTTS(req.Input)
	if err != nil {
		return backends.Output{}, err
	}
	if !voiceMatches(r.Voice, s.cfg.opts.Voice) {
		return backends.Output{}, audio.UnknownVoice("flite", r.Voice, s.cfg.opts.Voice, []string{s.cfg.opts.Voice})
	}
	s.lib.setStretch(s.voice, s.cfg.opts.DurationStretch/r.Speed)
	s.stream.begin(ctx)
	defer s.stream.end()
	var sentences []string
	for _, s := range audio.SplitSentences(r.Text, 300) {
		if t := Sanitize(s); t != "" {
			sentences = append(sentences, boundUnits(t)...) // units.go
		}
	}
	if len(sentences) == 0 {
		return backends.Output{}, backends.Invalidf("flite: the text has nothing flite can speak (it reads English in ASCII)")
	}
	var all []int16
	rate := 0
	chunks := audio.NewChunkEmitter(ctx, emit, r)
	for _, text := range sentences {
		if err := ctx.Err(); err != nil {
			return backends.Output{}, err
		}
		if unitHook != nil {
			unitHook(text)
		}
		samples, sr, err := s.lib.synth(s.voice, text)
		if cerr := ctx.Err(); cerr != nil {
			return backends.Output{}, cerr // the vocoder stopped (no wave) or the sentence ended
		}
		if err != nil {
			return backends.Output{}, err
		}
		rate = sr
		if req.Stream && emit != nil {
			if err := chunks.Write(sr, samples); err != nil {
				return backends.Output{}, err
			}
			continue
		}
		all = append(all, samples...)
	}
	if req.Stream && emit != nil {
		return backends.Output{}, chunks.Close()
	}
	return audio.EncodeTTS(ctx, r, rate, all)
}

// voiceMatches accepts the model's own voice, "" and OpenAI's stock voice
// names (which clients always send) as the model's voice.
func voiceMatches(asked, own string) bool {
	if audio.IsDefaultVoice(asked) {
		return true
	}
	switch strings.ToLower(asked) {
	case own, "cmu_us_" + own:
		return true
	}
	return false
}

// Close implements backends.Session.
func (s *session) Close(ctx context.Context) error {
	if s.voice != nil {
		s.stream.close()
		s.lib.delVoice(s.voice)
		s.voice = nil
		native.TrimHeap() // give the freed voice's pages back (E5)
	}
	return nil
}

// Sanitize maps text to the printable ASCII flite reads: typographic
// punctuation to its ASCII form, other non-ASCII and control characters to
// spaces.
func Sanitize(text string) string {
	var b strings.Builder
	for _, r := range text {
		switch {
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r == '\u2018' || r == '\u2019' || r == '\u02bc':
			b.WriteByte('\'')
		case r == '\u201c' || r == '\u201d':
			b.WriteByte('"')
		case r == '\u2013' || r == '\u2014':
			b.WriteString(" - ")
		case r == '\u2026':
			b.WriteString("...")
		default:
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
