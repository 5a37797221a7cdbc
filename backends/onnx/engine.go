// Package onnx is the ONNX Runtime engine (the runtime library from the npm
// package onnxruntime-node, bound with purego through OrtGetApiBase and the
// OrtApi function table), with the voice-activity task of Silero VAD v5.
// Each session owns an OrtSession, so sessions run in parallel and give
// bit-identical output; a request's context terminates its run through
// OrtRunOptions.
//
// Requests: see backends/audio (VAD). Body or Data is a WAV file (any rate,
// resampled to 16 kHz) or raw PCM16LE mono at Input's declared
// sample_rate (required for raw PCM), read with audio.DecodeInput; Input
// may override threshold, min_speech_ms, min_silence_ms and speech_pad_ms.
// The output is JSON {"segments":[{"start","end"}],"duration"} in seconds.
//
// Checkpoints: a catalogue folder whose manifest names engine "onnx", or
// the path of a .onnx file. Options: model ("silero-vad-v5"), file (the
// .onnx inside the checkpoint), provider ("cpu" or "cuda"; cuda fails with
// a clear error where the runtime has no usable CUDA provider),
// intra_op_threads (default 1, so slots scale across cores),
// allow_spinning (pool threads busy-wait for work; default off, which only
// matters above one thread), share_prepacked_weights (the sessions of a
// pool share one container of pre-packed weights; default off),
// disable_cpu_arena (the CPU allocator without its arena; default off), max_seconds
// (the longest accepted audio, 1..3600, default 300, checked against the
// WAV header before decoding) and the segmentation defaults above.
//
// Threading rule: the Engine is safe for concurrent use; a session is used
// by one goroutine at a time. One ONNX Runtime environment serves the
// process.
package onnx

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Name is the engine name model specs use.
const Name = "onnx"

// ModelSileroV5 is the model kind of Silero VAD v5.
const ModelSileroV5 = "silero-vad-v5"

// ParallelAdmission returns the slot ceiling of a model kind: 16 for the
// kinds that admit more than one slot (an OrtSession per slot shares no
// mutable state), 0 (one slot) for any other.
func ParallelAdmission(model string) int {
	if model == ModelSileroV5 {
		return 16
	}
	return 0
}

// Memory estimate: the runtime library and environment (measured 16 MB)
// are shared; a Silero session with its arena measured 12 MB.
const (
	baseMB    = 16
	perSlotMB = 12
)

// Config configures the engine.
type Config struct {
	_ struct{}
	// Library is the ONNX Runtime shared library ("" = DefaultLibrary()).
	Library string
}

// Engine is the ONNX Runtime engine.
type Engine struct{ lib string }

// New returns the engine.
func New(c Config) *Engine {
	if c.Library == "" {
		c.Library = DefaultLibrary()
	}
	return &Engine{lib: c.Library}
}

// Available reports whether ONNX Runtime loads from the default library
// and the Silero shim (ShimLibraries) loads.
func Available() error {
	if _, err := loadOrt(DefaultLibrary()); err != nil {
		return err
	}
	_, err := loadShim()
	return err
}

// Version returns the loaded runtime's version.
func (e *Engine) Version() (string, error) {
	o, err := loadOrt(e.lib)
	if err != nil {
		return "", err
	}
	return o.version, nil
}

// Name implements backends.Engine.
func (e *Engine) Name() string { return Name }

// Options are the engine options of an onnx model.
type Options struct {
	Model          string  `json:"model"`
	File           string  `json:"file,omitempty"`
	Provider       string  `json:"provider,omitempty"`
	IntraOpThreads int     `json:"intra_op_threads,omitempty"`
	AllowSpinning  bool    `json:"allow_spinning,omitempty"`
	SharePrepacked bool    `json:"share_prepacked_weights,omitempty"`
	NoCPUArena     bool    `json:"disable_cpu_arena,omitempty"`
	Threshold      float64 `json:"threshold,omitempty"`
	MinSpeechMS    int     `json:"min_speech_ms,omitempty"`
	MinSilenceMS   int     `json:"min_silence_ms,omitempty"`
	SpeechPadMS    int     `json:"speech_pad_ms,omitempty"`
	MaxSeconds     int     `json:"max_seconds,omitempty"`
}

// Bounds of the max_seconds option: like pocketsphinx's, five minutes by
// default (a request's audio is decoded into memory, 32 KB per second at
// 16 kHz, and Silero runs over all of it) and at most an hour.
const (
	defaultMaxSeconds = 300
	maxMaxSeconds     = 3600
)

type config struct {
	name       string
	model      string // absolute .onnx path
	tuning     tuning
	shareW     bool // one prepacked weights container per pool
	vad        vadParams
	maxSlots   int
	maxSeconds int
}

// resolve checks spec and the model file without loading the runtime.
func resolve(spec backends.Spec) (config, error) {
	if spec.Task != "vad" {
		return config{}, backends.Invalidf("onnx: task %q, want vad (the only ONNX pipeline is Silero VAD)", spec.Task)
	}
	var defaults json.RawMessage
	c := config{maxSlots: catalogue.MaxSlots}
	var cp *catalogue.Checkpoint
	if st, err := os.Stat(spec.Checkpoint); err == nil && st.Mode().IsRegular() && strings.HasSuffix(spec.Checkpoint, ".onnx") {
		c.name, c.model = filepath.Base(spec.Checkpoint), spec.Checkpoint
	} else {
		var err error
		if cp, err = catalogue.Load(spec.Checkpoint); err != nil {
			return config{}, fmt.Errorf("onnx: %w", err)
		}
		if cp.Engine != Name || cp.Task != "vad" {
			return config{}, backends.Invalidf("onnx: checkpoint %q is for engine %q task %q", cp.Name, cp.Engine, cp.Task)
		}
		c.name, defaults, c.maxSlots = cp.Name, cp.Options, cp.Parallel.MaxSlots
	}
	merged, err := catalogue.MergeOptions(defaults, spec.Options)
	if err != nil {
		return config{}, fmt.Errorf("onnx: %w", err)
	}
	var o Options
	if err := audio.DecodeStrict(merged, &o); err != nil {
		return config{}, fmt.Errorf("onnx: options: %w", err)
	}
	if o.Model != ModelSileroV5 {
		return config{}, backends.Invalidf("onnx: model %q (supported: %s)", o.Model, ModelSileroV5)
	}
	if cp != nil {
		if o.File == "" {
			return config{}, backends.Invalidf("onnx: option file is required")
		}
		if c.model, err = cp.File(o.File); err != nil {
			return config{}, fmt.Errorf("onnx: %w", err)
		}
	}
	switch o.Provider {
	case "", "cpu":
		c.tuning.provider = "cpu"
	case "cuda":
		c.tuning.provider = "cuda"
	default:
		return config{}, backends.Invalidf("onnx: provider %q (cpu or cuda)", o.Provider)
	}
	if c.tuning.threads = o.IntraOpThreads; c.tuning.threads == 0 {
		c.tuning.threads = 1
	}
	if c.tuning.threads < 1 || c.tuning.threads > 64 {
		return config{}, backends.Invalidf("onnx: intra_op_threads %d outside 1..64", c.tuning.threads)
	}
	c.tuning.spinning, c.tuning.noArena, c.shareW = o.AllowSpinning, o.NoCPUArena, o.SharePrepacked
	if c.maxSeconds = o.MaxSeconds; c.maxSeconds == 0 {
		c.maxSeconds = defaultMaxSeconds
	}
	if c.maxSeconds < 1 || c.maxSeconds > maxMaxSeconds {
		return config{}, backends.Invalidf("onnx: max_seconds %d outside 1..%d", c.maxSeconds, maxMaxSeconds)
	}
	c.vad = vadParams{Threshold: 0.5, MinSpeechMS: 250, MinSilenceMS: 100, SpeechPadMS: 30}
	if err := overlayVAD(&c.vad, o.Threshold, o.MinSpeechMS, o.MinSilenceMS, o.SpeechPadMS); err != nil {
		return config{}, err
	}
	if err := checkModelFile(c.model); err != nil {
		return config{}, err
	}
	c.maxSlots = min(c.maxSlots, max(1, ParallelAdmission(o.Model)))
	return c, nil
}

// overlayVAD applies non-zero settings to p and checks the result.
func overlayVAD(p *vadParams, threshold float64, minSpeech, minSilence, pad int) error {
	if threshold != 0 {
		p.Threshold = threshold
	}
	if minSpeech != 0 {
		p.MinSpeechMS = minSpeech
	}
	if minSilence != 0 {
		p.MinSilenceMS = minSilence
	}
	if pad != 0 {
		p.SpeechPadMS = pad
	}
	switch {
	case p.Threshold <= 0 || p.Threshold >= 1:
		return backends.Invalidf("vad: threshold %v outside (0, 1)", p.Threshold)
	case p.MinSpeechMS < 0 || p.MinSpeechMS > 60000, p.MinSilenceMS < 0 || p.MinSilenceMS > 60000, p.SpeechPadMS < 0 || p.SpeechPadMS > 10000:
		return backends.Invalidf("vad: min_speech_ms, min_silence_ms or speech_pad_ms out of range")
	}
	return nil
}

// checkModelFile rejects what is plainly not an ONNX protobuf before the
// runtime parses it (ONNX Runtime itself reports malformed models as
// errors, so this only sharpens the message).
func checkModelFile(p string) error {
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return backends.Invalidf("onnx: model file %s is missing", p)
	}
	if st.Size() < 16 {
		return backends.Invalidf("onnx: model file %s is too small (%d bytes) to be a model", p, st.Size())
	}
	fh, err := os.Open(p)
	if err != nil {
		return backends.Invalidf("onnx: %v", err)
	}
	defer fh.Close()
	head := make([]byte, 1)
	if _, err := fh.Read(head); err != nil || head[0] != 0x08 { // field 1 (ir_version), varint
		return backends.Invalidf("onnx: %s is not an ONNX model (bad header)", p)
	}
	return nil
}

// Validate implements backends.Engine: Check without its estimate.
func (e *Engine) Validate(spec backends.Spec) error {
	_, err := e.Check(spec)
	return err
}

// Check implements backends.Engine, from one resolve of the spec: the
// slot count, the runtime library and the session options the tuning
// asks for.
func (e *Engine) Check(spec backends.Spec) (int64, error) {
	c, err := resolve(spec)
	if err != nil {
		return 0, err
	}
	if spec.Slots < 1 || spec.Slots > c.maxSlots {
		return 0, backends.Invalidf("onnx: checkpoint %s admits 1..%d slots, asked for %d", c.name, c.maxSlots, spec.Slots)
	}
	o, err := loadOrt(e.lib)
	if err != nil {
		return 0, err
	}
	opts, err := o.sessionOptions(c.tuning)
	if err != nil {
		return 0, backends.AsInvalid(err)
	}
	o.releaseSessionOpts(opts)
	return backends.LinearMB(baseMB, perSlotMB, spec.Slots), nil
}

// Open implements backends.Engine.
func (e *Engine) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	c, err := resolve(spec)
	if err != nil {
		return nil, 0, err
	}
	var w *prepacked
	if c.shareW {
		o, err := loadOrt(e.lib)
		if err != nil {
			return nil, 0, err
		}
		if w, err = o.newPrepacked(); err != nil {
			return nil, 0, err
		}
		w.acquire()
		defer w.release() // the sessions hold their own references
	}
	s, err := e.newSession(ctx, c, w)
	if err != nil {
		return nil, 0, err
	}
	return s, c.maxSlots, nil
}

// Probe implements backends.Engine: it opens a real session, so a model the
// runtime rejects fails the probe.
func (e *Engine) Probe(ctx context.Context, spec backends.Spec) (int, error) {
	return backends.ProbeByOpening(ctx, spec, e.Open)
}

type session struct {
	eng *Engine
	cfg config
	vad *silero
	w   *prepacked // shared by the pool's sessions, or nil
}

func (e *Engine) newSession(ctx context.Context, c config, w *prepacked) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := loadOrt(e.lib)
	if err != nil {
		return nil, err
	}
	opts, err := o.sessionOptions(c.tuning)
	if err != nil {
		return nil, backends.AsInvalid(err)
	}
	defer o.releaseSessionOpts(opts)
	v, err := newSilero(o, c.model, opts, w)
	if err != nil {
		return nil, err
	}
	if w != nil {
		w.acquire()
	}
	return &session{eng: e, cfg: c, vad: v, w: w}, nil
}

// Clone implements backends.Session.
func (s *session) Clone(ctx context.Context, index int) (backends.Session, error) {
	if index < 1 || index >= s.cfg.maxSlots {
		return nil, backends.Invalidf("onnx: checkpoint %s admits %d slots, cannot clone session %d", s.cfg.name, s.cfg.maxSlots, index)
	}
	return s.eng.newSession(ctx, s.cfg, s.w)
}

// Infer implements backends.Session.
func (s *session) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if s.vad == nil {
		return backends.Output{}, fmt.Errorf("onnx: session is closed")
	}
	if req.Live != nil {
		return s.live(ctx, req, emit)
	}
	var r audio.VADRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	p := s.cfg.vad
	if err := overlayVAD(&p, r.Threshold, r.MinSpeechMS, r.MinSilenceMS, r.SpeechPadMS); err != nil {
		return backends.Output{}, err
	}
	// audio.duration-limit: max_seconds from the header, before decoding.
	a, err := audio.DecodeInput(ctx, req, audio.Want{Rate: sileroRate, MaxSeconds: float64(s.cfg.maxSeconds), RawRate: r.SampleRate})
	if err != nil {
		return backends.Output{}, fmt.Errorf("onnx: %w", err)
	}
	probs, err := s.vad.probabilities(ctx, audio.Float32(a.Samples))
	if err != nil {
		return backends.Output{}, err
	}
	res := audio.VADResult{Segments: toSeconds(segments(probs, len(a.Samples), p)), Duration: ms(len(a.Samples))}
	b, err := json.Marshal(res)
	if err != nil {
		return backends.Output{}, err
	}
	if req.Stream && emit != nil {
		if err := emit(b); err != nil {
			return backends.Output{}, err
		}
	}
	return backends.Output{JSON: b}, nil
}

// Close implements backends.Session.
func (s *session) Close(ctx context.Context) error {
	if s.vad != nil {
		s.vad.close()
		s.vad = nil
		if s.w != nil {
			s.w.release()
			s.w = nil
		}
		native.TrimHeap() // give the freed session's pages back (E5)
	}
	return nil
}
