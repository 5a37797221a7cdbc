// Package whisper is the whisper.cpp speech recognition engine: whisper.cpp
// 1.9.1, built by `make deps` from the source the npm package
// nodejs-whisper ships (shim/build.sh: libwhisper, ggml with its CPU
// variants chosen at run time, Sluice's C shim libsluice_whisper.so),
// loaded with purego.
//
// The primary session loads the model once into a whisper_context (the
// immutable weights and vocabulary); each slot, the primary included, owns
// a whisper_state (its KV caches, mel buffer and results) that decodes
// against that shared context, so the slots run in parallel over one copy
// of the weights. The context is freed when the last session closes.
//
// Model files: every type whisper.cpp 1.9.1 loads (f32, f16, q4_0, q4_1,
// q5_0, q5_1, q8_0; 80 or 128 mel bands), checked completely (CheckModel)
// before the library reads them, and refused when the memory their header
// implies (the tensors and one state) exceeds what the process may still
// use (backends/internal/memlimit: cgroup limit, else physical memory,
// else --memory-budget, minus what is resident).
//
// Requests: see backends/audio (ASR). Body or Data is a WAV file
// (resampled to 16 kHz) or declared raw PCM16LE, read with
// audio.DecodeInput. Input (audio.AudioRequest): language (one whisper
// knows; an English-only model knows only "en"; none: detected, with its
// probability in the answer), task ("translate": into English, a
// multilingual model only), prompt (whisper's initial prompt, at most
// MaxPromptTokens tokens and half the model's text context), temperature
// (0: greedy, deterministic; above 0 up to 1: sampling with whisper's
// fallback in SamplingFallback steps; every decoder's generator is
// seeded with its index at each request, so identical requests give
// identical answers). The output is an audio.ASRResult: whisper's
// segments with their times, the words folded from its token-level
// timestamps (a token with a leading space starts a word; DTW token times
// with option dtw), the language. No context carries across requests, so
// the result depends on the request alone, whichever slot runs it. With
// Request.Stream each segment goes out as an audio.TranscriptDelta as
// whisper's new-segment callback produces it (stream.go), then the result.
//
// Live sessions (live.go): a turn is re-decoded every live_step_ms of its
// audio on the session's slot, and only the text of settled segments goes
// out as partials. The VAD filter (vad.go): with vad_filter, Sluice's
// Silero VAD v5 session cuts the silences before whisper decodes.
//
// Cancellation: the request's context (a client gone, a shutdown) sets a
// flag in C memory that the shim's abort callback reads between graph
// nodes of every encoder and decoder graph (a fix build.sh applies to
// 1.9.1) and before each 30 s window, so a decode stops within one node
// and the slot is free again.
//
// Checkpoints: a catalogue folder whose manifest names engine "whisper";
// options file (the ggml model, relative to the checkpoint; required),
// threads (per state, 1..64, default 1), language ("" or "auto": detect;
// else the ISO-639-1 code the model transcribes when a request names
// none), max_seconds (1..7200, default 600, checked against the audio's
// header before decoding), oversubscribe (see capacity below), gpu (use
// the library's GPU backend, in a CUDA or Vulkan build), dtw (word
// times from DTW token timestamps: a published model's alignment heads,
// checked against the file's dimensions, or "top-N"), vad_file (a Silero
// VAD v5 .onnx in the checkpoint, run by ONNX Runtime in each slot) and
// vad_filter (the default of a request's vad_filter: decode only the
// speech the VAD finds, vad.go).
//
// Capacity: min(the manifest's max_slots, cores / threads), because a
// state computes with its own threads and more of them than cores only
// queue for the CPU; oversubscribe: true advertises the manifest's
// max_slots regardless (benchmarks and the matched-output check at 4
// slots on small machines).
//
// Threading rule: the Engine is safe for concurrent use; a session is used
// by one goroutine at a time; sessions of one pool share the context
// read-only (whisper.cpp's design) and their own states.
package whisper

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/memlimit"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// Name is the engine name model specs use.
const Name = "whisper"

// SampleRate is the rate whisper's front end expects.
const SampleRate = 16000

// Options are the engine options of a whisper model.
type Options struct {
	File          string `json:"file"`
	Threads       int    `json:"threads,omitempty"`
	Language      string `json:"language,omitempty"`
	MaxSeconds    int    `json:"max_seconds,omitempty"`
	Oversubscribe bool   `json:"oversubscribe,omitempty"`
	// GPU asks the library for its GPU backend (a CUDA or Vulkan build:
	// see shim/build.sh); a CPU build ignores it.
	GPU bool `json:"gpu,omitempty"`
	// DTW turns on whisper.cpp's DTW token timestamps for word times: the
	// alignment heads of a published model ("tiny.en", "tiny", "base.en",
	// "base", "small.en", "small", "medium.en", "medium", "large-v1",
	// "large-v2", "large-v3", "large-v3-turbo", checked against the
	// file's dimensions) or "top-N", every head of the N top text layers
	// (any model). "" (default): token timestamps.
	DTW string `json:"dtw,omitempty"`
	// VADFile is a Silero VAD v5 .onnx inside the checkpoint: each slot
	// opens it (ONNX Runtime) for the VAD filter (vad.go).
	VADFile string `json:"vad_file,omitempty"`
	// VADFilter is the default of a request's vad_filter (needs VADFile).
	VADFilter bool `json:"vad_filter,omitempty"`
	// LiveStepMS is the turn audio between two partial decodes of a live
	// session (live.go), 100..30000 ms, default 1000.
	LiveStepMS int `json:"live_step_ms,omitempty"`
	// LiveWindowMS bounds the unfrozen audio of a live decode, from
	// live_step_ms + 2000 to 29000 ms, default 29000.
	LiveWindowMS int `json:"live_window_ms,omitempty"`
}

// dtwPresets are whisper.cpp's alignment-head presets (enum
// whisper_alignment_heads_preset) with the text dimensions of the model
// each belongs to: text layers, heads, state, vocabulary.
var dtwPresets = map[string]struct{ id, layers, heads, state, vocab int32 }{
	"tiny.en":        {3, 4, 6, 384, 51864},
	"tiny":           {4, 4, 6, 384, 51865},
	"base.en":        {5, 6, 8, 512, 51864},
	"base":           {6, 6, 8, 512, 51865},
	"small.en":       {7, 12, 12, 768, 51864},
	"small":          {8, 12, 12, 768, 51865},
	"medium.en":      {9, 24, 16, 1024, 51864},
	"medium":         {10, 24, 16, 1024, 51865},
	"large-v1":       {11, 32, 20, 1280, 51865},
	"large-v2":       {12, 32, 20, 1280, 51865},
	"large-v3":       {13, 32, 20, 1280, 51866},
	"large-v3-turbo": {14, 4, 20, 1280, 51866},
}

// dtwTopMost is WHISPER_AHEADS_N_TOP_MOST.
const dtwTopMost = 1

// dtwParams resolves option dtw against the model's hyperparameters.
func dtwParams(opt string, h synth.Hparams) (loadParams, error) {
	var lp loadParams
	if opt == "" {
		return lp, nil
	}
	if n, ok := strings.CutPrefix(opt, "top-"); ok {
		k, err := strconv.Atoi(n)
		if err != nil || k < 1 || int32(k) > h.TextLayer {
			return lp, backends.Invalidf("whisper: option dtw %q: N must be 1..%d (the model's text layers)", opt, h.TextLayer)
		}
		lp.dtwPreset, lp.dtwNTop = dtwTopMost, int32(k)
		return lp, nil
	}
	p, ok := dtwPresets[opt]
	if !ok {
		return lp, backends.Invalidf("whisper: option dtw %q is not a published model's alignment heads nor top-N", opt)
	}
	if h.TextLayer != p.layers || h.TextHead != p.heads || h.TextState != p.state || h.Vocab != p.vocab {
		// A preset names heads by layer and index: on other dimensions
		// they would be another model's heads, or out of range.
		return lp, backends.Invalidf("whisper: option dtw %q is for a model of %d text layers, %d heads, state %d, vocabulary %d; this file has %d, %d, %d, %d",
			opt, p.layers, p.heads, p.state, p.vocab, h.TextLayer, h.TextHead, h.TextState, h.Vocab)
	}
	lp.dtwPreset = p.id
	return lp, nil
}

// Engine is the whisper engine.
type Engine struct{}

// New returns the whisper engine.
func New() *Engine { return &Engine{} }

// Name implements backends.Engine.
func (e *Engine) Name() string { return Name }

type config struct {
	name       string
	file       string // absolute
	info       ModelInfo
	threads    int
	language   string // "" = detect
	maxSeconds int
	capacity   int
	gpu        bool
	load       loadParams // the context parameters (DTW)
	dtw        bool       // word times from DTW token timestamps
	vadFile    string     // absolute; "" = no VAD filter
	vadFilter  bool       // a request's vad_filter default
	liveStep   int        // samples between live partial decodes
	liveWindow int        // samples: the unfrozen audio a live decode sees at most
}

func resolve(spec backends.Spec) (config, error) {
	var o Options
	cp, err := catalogue.EngineOptions(spec, Name, "asr", &o)
	if err != nil {
		return config{}, err
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	if o.MaxSeconds == 0 {
		o.MaxSeconds = 600
	}
	switch {
	case o.File == "":
		return config{}, backends.Invalidf("whisper: option file (the ggml model) is required")
	case o.Threads < 1 || o.Threads > 64:
		return config{}, backends.Invalidf("whisper: threads %d outside 1..64", o.Threads)
	case o.MaxSeconds < 1 || o.MaxSeconds > 7200:
		return config{}, backends.Invalidf("whisper: max_seconds %d outside 1..7200", o.MaxSeconds)
	}
	if o.Language == "auto" {
		o.Language = ""
	}
	path, err := cp.File(o.File)
	if err != nil {
		return config{}, fmt.Errorf("whisper: %w", err)
	}
	info, err := CheckModel(path)
	if err != nil {
		return config{}, err
	}
	// The file's header implies its memory (the weights and one state);
	// one the process cannot hold is refused here, before ggml's
	// allocation fails and aborts the process.
	if err := memlimit.Fits(memoryNeed(info), "whisper: model file "+filepath.Base(path)+" ("+info.Type+")"); err != nil {
		return config{}, backends.AsInvalid(fmt.Errorf("%w (checkpoint %s)", err, cp.Name))
	}
	c := config{name: cp.Name, file: path, info: info, threads: o.Threads, maxSeconds: o.MaxSeconds, gpu: o.GPU}
	if c.load, err = dtwParams(o.DTW, info.Hparams); err != nil {
		return config{}, err
	}
	c.dtw = c.load.dtwPreset != 0
	if o.VADFile != "" {
		if c.vadFile, err = cp.File(o.VADFile); err != nil {
			return config{}, fmt.Errorf("whisper: option vad_file: %w", err)
		}
	} else if o.VADFilter {
		return config{}, backends.Invalidf("whisper: option vad_filter needs option vad_file (a Silero VAD v5 .onnx in the checkpoint)")
	}
	c.vadFilter = o.VADFilter
	c.liveStep, c.liveWindow = LiveStep, LiveWindow
	if o.LiveStepMS != 0 {
		if o.LiveStepMS < 100 || o.LiveStepMS > 30000 {
			return config{}, backends.Invalidf("whisper: option live_step_ms %d outside 100..30000", o.LiveStepMS)
		}
		c.liveStep = o.LiveStepMS * SampleRate / 1000
	}
	if o.LiveWindowMS != 0 {
		c.liveWindow = o.LiveWindowMS * SampleRate / 1000
	}
	if c.liveWindow < c.liveStep+liveMargin || c.liveWindow > 29*SampleRate {
		return config{}, backends.Invalidf("whisper: option live_window_ms %d outside live_step_ms + 2000 (%d) .. 29000", c.liveWindow*1000/SampleRate, (c.liveStep+liveMargin)*1000/SampleRate)
	}
	if o.Language != "" {
		if c.language, err = audio.CheckLanguage(o.Language, languagesOf(info)); err != nil {
			return config{}, fmt.Errorf("whisper: option %w", err)
		}
	}
	c.capacity = cp.Parallel.MaxSlots
	if !o.Oversubscribe {
		c.capacity = max(1, min(c.capacity, runtime.NumCPU()/o.Threads))
	}
	return c, nil
}

// languagesOf lists the languages a model transcribes: whisper's list for
// a multilingual model, English alone for an English-only one.
func languagesOf(info ModelInfo) []string {
	if !info.Multilingual {
		return []string{"en"}
	}
	l, err := load()
	if err != nil {
		return []string{"en"}
	}
	return l.langs
}

// Validate implements backends.Engine: Check without its estimate.
func (e *Engine) Validate(spec backends.Spec) error {
	_, err := e.Check(spec)
	return err
}

// Check implements backends.Engine, from one resolve of the spec: the
// slot count against the checkpoint's capacity and the library's
// presence; the estimate is the weights once, and per state its KV caches
// (self and cross attention, f16) and its compute buffers (the encoder's
// attention scores dominate: 1500 x 1500 f32 per head).
func (e *Engine) Check(spec backends.Spec) (int64, error) {
	c, err := resolve(spec)
	if err != nil {
		return 0, err
	}
	if spec.Slots < 1 || spec.Slots > c.capacity {
		return 0, backends.Invalidf("whisper: checkpoint %s admits 1..%d slots at %d threads each on %d cores, asked for %d", c.name, c.capacity, c.threads, runtime.NumCPU(), spec.Slots)
	}
	if err := Available(); err != nil {
		return 0, err
	}
	return backends.LinearMB(8+c.info.WeightBytes>>20, stateBytes(c.info.Hparams)>>20, spec.Slots), nil
}

// stateBytes is one whisper_state's memory: its KV caches (self and cross
// attention, f16), its compute buffers (the encoder's attention scores
// dominate: 1500 x 1500 f32 per head) and 16 MB of the rest.
func stateBytes(h synth.Hparams) int64 {
	kv := 2 * 2 * int64(h.TextLayer) * int64(h.TextState) * (int64(h.TextCtx) + int64(h.AudioCtx))
	scores := 4 * int64(h.AudioCtx) * int64(h.AudioCtx) * int64(h.AudioHead)
	return 16<<20 + kv + scores
}

// memoryNeed is what loading a model and decoding on one slot takes: the
// tensors' data as the header declares it, and one state.
func memoryNeed(info ModelInfo) int64 { return info.WeightBytes + stateBytes(info.Hparams) }

// Open implements backends.Engine.
func (e *Engine) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	c, err := resolve(spec)
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	l, err := load()
	if err != nil {
		return nil, 0, err
	}
	lp := c.load
	if c.gpu {
		lp.useGPU = 1
	}
	wctx, err := l.loadModel(c.file, lp, nil)
	if err != nil {
		return nil, 0, backends.AsInvalid(fmt.Errorf("whisper: checkpoint %s: %w", c.name, err))
	}
	m := &model{lib: l, ctx: wctx, refs: 1}
	s, err := newSession(ctx, m, c)
	if err != nil {
		m.release()
		return nil, 0, err
	}
	return s, c.capacity, nil
}

// Probe implements backends.Engine: a real load, so a model the library
// rejects fails the probe.
func (e *Engine) Probe(ctx context.Context, spec backends.Spec) (int, error) {
	return backends.ProbeByOpening(ctx, spec, e.Open)
}

// model is the shared whisper_context of a pool, freed with its last
// session.
type model struct {
	lib  *lib
	ctx  unsafe.Pointer
	mu   sync.Mutex
	refs int
}

func (m *model) retain() {
	m.mu.Lock()
	m.refs++
	m.mu.Unlock()
}

// trimHeap returns the C heap's free pages once a context is freed
// (native.TrimHeap); a variable so a test can count the calls.
var trimHeap = native.TrimHeap

func (m *model) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs--
	if m.refs == 0 && m.ctx != nil {
		m.lib.free(m.ctx)
		m.ctx = nil
		trimHeap() // give the freed context's pages back (engine.native-memory)
	}
}

// session is one slot: a whisper_state over the pool's context, and its
// own Silero session when the checkpoint has a VAD model.
type session struct {
	m     *model
	cfg   config
	state unsafe.Pointer
	vad   *onnx.VAD
}

func newSession(ctx context.Context, m *model, c config) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var v *onnx.VAD
	if c.vadFile != "" {
		var err error
		if v, err = onnx.OpenVAD(ctx, "", c.vadFile, 1); err != nil {
			return nil, backends.AsInvalid(fmt.Errorf("whisper: checkpoint %s: option vad_file: %w", c.name, err))
		}
	}
	st := m.lib.initState(m.ctx)
	if st == nil {
		if v != nil {
			v.Close()
		}
		return nil, fmt.Errorf("whisper: checkpoint %s: whisper_init_state failed: %s", c.name, m.lib.takeError())
	}
	return &session{m: m, cfg: c, state: st, vad: v}, nil
}

// Clone implements backends.Session: a new state over the same context.
func (s *session) Clone(ctx context.Context, index int) (backends.Session, error) {
	if index < 1 || index >= s.cfg.capacity {
		return nil, backends.Invalidf("whisper: checkpoint %s admits %d slots, cannot clone session %d", s.cfg.name, s.cfg.capacity, index)
	}
	if s.state == nil {
		return nil, fmt.Errorf("whisper: cannot clone a closed session")
	}
	s.m.retain()
	c, err := newSession(ctx, s.m, s.cfg)
	if err != nil {
		s.m.release()
		return nil, err
	}
	return c, nil
}

// Close implements backends.Session.
func (s *session) Close(ctx context.Context) error {
	if s.state != nil {
		s.m.lib.freeState(s.state)
		s.state = nil
		s.m.release()
	}
	if s.vad != nil {
		s.vad.Close()
		s.vad = nil
	}
	return nil
}
