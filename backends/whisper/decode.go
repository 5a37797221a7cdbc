package whisper

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// MaxPromptTokens is OpenAI's bound on a transcription prompt, and
// whisper's: the decoder keeps at most n_text_ctx/2 prompt tokens (224
// in every published model; a smaller synthetic model's half context
// bounds it further).
const MaxPromptTokens = 224

// SamplingFallback is the temperature step of whisper's fallback when a
// request asks for a temperature above 0 (whisper.cpp's default): a
// window whose decode fails the entropy or log-probability thresholds is
// decoded again at temperature + SamplingFallback, up to 1.
const SamplingFallback = 0.2

// decodeReq is one request's decoding choices, checked.
type decodeReq struct {
	lang        string // "" = detect
	translate   bool
	prompt      string
	temperature float32
}

// check resolves an AudioRequest against the checkpoint: the language
// (one the model knows), the task (translate needs a multilingual
// model), the prompt (at most MaxPromptTokens tokens, or half the
// model's text context) and the temperature (0..1). Each refusal names
// its field.
func (s *session) check(r audio.AudioRequest) (decodeReq, error) {
	d := decodeReq{lang: s.cfg.language}
	if r.Language != "" {
		var err error
		if d.lang, err = audio.CheckLanguage(r.Language, languagesOf(s.cfg.info)); err != nil {
			return d, fmt.Errorf("whisper: %w", err)
		}
	}
	if d.lang == "" && !s.cfg.info.Multilingual {
		d.lang = "en" // an English-only model has no language to detect
	}
	switch r.Task {
	case "", audio.TaskTranscribe:
	case audio.TaskTranslate:
		if !s.cfg.info.Multilingual {
			return d, backends.Invalidf("whisper: task translate: checkpoint %s's model is English-only (n_vocab %d): only a multilingual Whisper model translates", s.cfg.name, s.cfg.info.Hparams.Vocab)
		}
		d.translate = true
	default:
		return d, backends.Invalidf("whisper: task %q is not transcribe or translate", r.Task)
	}
	if r.Temperature < 0 || r.Temperature > 1 {
		return d, backends.Invalidf("whisper: temperature %g outside 0..1", r.Temperature)
	}
	d.temperature = float32(r.Temperature)
	if r.Prompt != "" {
		limit := min(MaxPromptTokens, int(s.cfg.info.Hparams.TextCtx)/2)
		n := s.m.lib.countTokens(s.m.ctx, r.Prompt, limit)
		if n > limit {
			return d, backends.Invalidf("whisper: prompt is %d tokens, over the %d this model takes", n, limit)
		}
		d.prompt = r.Prompt
	}
	return d, nil
}

// Infer implements backends.Session.
func (s *session) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if s.state == nil {
		return backends.Output{}, fmt.Errorf("whisper: session is closed")
	}
	if req.Live != nil {
		return s.live(ctx, req, emit)
	}
	var r audio.AudioRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	d, err := s.check(r)
	if err != nil {
		return backends.Output{}, err
	}
	filtered, err := s.useVAD(r)
	if err != nil {
		return backends.Output{}, err
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
	stream := req.Stream && emit != nil
	var sink func(audio.TranscriptDelta) error
	if stream {
		sink = func(d audio.TranscriptDelta) error {
			b, err := marshalDelta(d)
			if err != nil {
				return err
			}
			return emit(b)
		}
	}
	run := s.transcribe
	if filtered {
		run = s.transcribeFiltered
	}
	res, err := run(ctx, a.Samples, d, dur, sink)
	if err != nil {
		return backends.Output{}, err
	}
	res.Streamed = stream
	b, err := marshal(res)
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

// decoding is a test hook: it counts whisper_full calls in progress, so
// a streaming test can tell that a delta arrived while whisper decoded.
var decoding atomic.Int32

// minDetectSamples is the shortest audio (0.1 s) whisper is asked to
// detect a language in.
const minDetectSamples = SampleRate / 10

// transcribe runs whisper_full_with_state on samples. The request's
// context ending sets the abort flag the shim's callback reads. With
// sink, each segment goes to it as whisper produces it (stream.go).
func (s *session) transcribe(ctx context.Context, samples []int16, d decodeReq, dur float64, sink func(audio.TranscriptDelta) error) (audio.ASRResult, error) {
	if d.lang == "" && len(samples) < minDetectSamples {
		// Too short to hold a word or to detect a language from:
		// whisper_full fails on it (no mel frame) or reports a
		// meaningless probability, so the answer is the empty
		// transcript, with no language, as with a language named.
		res := audio.ASRResult{Duration: dur}
		if d.translate {
			res.Task = audio.TaskTranslate
		}
		return res, nil
	}
	l := s.m.lib
	pcm := native.Malloc(4 * max(1, len(samples)))
	defer native.Free(pcm)
	f := unsafe.Slice((*float32)(pcm), len(samples))
	for i, v := range samples {
		f[i] = float32(v) / 32768
	}
	// One block of C memory: the request, its abort flag and poll counter,
	// the language string, the prompt.
	reqSize := int(unsafe.Sizeof(cReq{}))
	mem := native.Malloc(reqSize + 16 + 8 + len(d.prompt) + 1)
	defer native.Free(mem)
	cr := (*cReq)(mem)
	abortFlag := (*int32)(unsafe.Add(mem, reqSize))
	polls := unsafe.Add(mem, reqSize+8)
	langC := unsafe.Add(mem, reqSize+16)
	promptC := unsafe.Add(mem, reqSize+24)
	*cr = cReq{nThreads: int32(s.cfg.threads), tokenTimestamps: 1, abort: unsafe.Pointer(abortFlag), polls: polls,
		notifyFD: notifyFD(s.cfg.file, -1), segmentFD: -1, ackFD: -1}
	if d.lang == "" {
		cr.detectLanguage = 1
	} else {
		copy(unsafe.Slice((*byte)(langC), 7), d.lang) // ISO-639-1 codes (whisper has "haw": 3 letters)
		cr.language = langC
	}
	if d.translate {
		cr.translate = 1
	}
	if d.prompt != "" {
		p := unsafe.Slice((*byte)(promptC), len(d.prompt)+1)
		copy(p, d.prompt)
		p[len(d.prompt)] = 0
		cr.initialPrompt = promptC
	}
	if d.temperature > 0 {
		// Sampling with whisper's fallback; every decoder's generator is
		// reseeded per request (shim/build.sh), so the answer is the
		// request's alone.
		cr.temperature, cr.temperatureInc = d.temperature, SamplingFallback
	}
	abort := func() { atomicStore(abortFlag, 1) }
	var st *segmentStream
	if sink != nil {
		var err error
		if st, err = newSegmentStream(sink, abort); err != nil {
			return audio.ASRResult{}, err
		}
		cr.segmentFD, cr.ackFD = st.fds()
	}
	stop := context.AfterFunc(ctx, abort)
	decoding.Add(1)
	rc := l.full(s.m.ctx, s.state, mem, pcm, int32(len(samples)))
	decoding.Add(-1)
	stop()
	var streamErr error
	if st != nil {
		streamErr = st.close()
	}
	// An abort between windows (the encoder-begin callback) ends
	// whisper_full with 0 and a partial result: the context decides.
	if err := ctx.Err(); err != nil {
		return audio.ASRResult{}, fmt.Errorf("whisper: decoding stopped: %w", err)
	}
	if streamErr != nil {
		return audio.ASRResult{}, fmt.Errorf("whisper: streaming a segment: %w", streamErr)
	}
	if rc != 0 {
		return audio.ASRResult{}, fmt.Errorf("whisper: whisper_full failed (code %d): %s", rc, l.takeError())
	}
	res := s.results(dur)
	lang := d.lang
	if lang == "" {
		if id := cr.outLangID; id >= 0 && int(id) < len(l.langs) {
			lang = l.langs[id]
			res.LanguageProbability = round3(float64(cr.outLangProb))
		}
	}
	res.Language = lang
	res.Duration = dur
	if d.translate {
		res.Task = audio.TaskTranslate
	}
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
			if s.cfg.dtw && tt[2] >= 0 {
				// DTW gives the moment a token was spoken: the word
				// starts there (its end is the next token's moment).
				t0 = min(dur, cs(tt[2]))
				t1 = t0
			}
			res.Words = foldToken(res.Words, piece, t0, t1)
		}
	}
	res.Text = strings.Join(text, " ")
	for i := range res.Words {
		w := &res.Words[i]
		if s.cfg.dtw && i+1 < len(res.Words) {
			w.End = max(w.End, res.Words[i+1].Start)
		}
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
