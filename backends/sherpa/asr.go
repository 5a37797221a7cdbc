package sherpa

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// SampleRate is the rate of every recognizer's front end here (80-dim
// fbank at 16 kHz, sherpa-onnx's default).
const SampleRate = 16000

// transcribe runs an offline ASR request (see backends/audio: Body or Data
// is the audio, Input an optional AudioRequest). A fresh stream per
// request holds the features and the result, so the answer depends on the
// request alone. Cancellation: the decode call cannot be interrupted; the
// audio is bounded by max_seconds (checked against its header before
// decoding) and ctx is checked before and after the call.
//
// pick returns the recognizer for a language (the slot's, see langs.go);
// nil means m serves every request.
func (m *model) transcribe(ctx context.Context, req backends.Request, pick func(string) (*model, error)) (backends.Output, error) {
	f, err := m.asrFields(req, true)
	if err != nil {
		return backends.Output{}, err
	}
	lang, recLang, hw := f.lang, f.recLang, f.hotwords
	a, err := m.decodeUpload(ctx, req, f)
	if err != nil {
		return backends.Output{}, err
	}
	if err := ctx.Err(); err != nil {
		return backends.Output{}, err
	}
	if pick != nil {
		if m, err = pick(recLang); err != nil {
			return backends.Output{}, err
		}
	}
	dur := math.Round(a.Seconds()*1000) / 1000
	if len(a.Samples) < minOfflineSamples {
		// Too short to hold a word; sherpa-onnx's Whisper front end
		// crashes the process on a few samples (no feature frame), so no
		// recognizer is given less than this.
		return marshalASR(audio.ASRResult{Duration: dur, Language: lang})
	}
	samples := floatSamples(a.Samples)
	defer native.Free(samples)
	st := m.offlineStream(hw)
	if st == 0 {
		return backends.Output{}, fmt.Errorf("sherpa: could not create a stream")
	}
	defer m.lib.destroyOffStr(st)
	m.lib.acceptOff(st, SampleRate, samples, int32(len(a.Samples)))
	// The decode itself cannot be interrupted (sherpa.cancel): a request
	// whose context ended before it is not decoded.
	hook("offline-decode")
	if err := ctx.Err(); err != nil {
		return backends.Output{}, err
	}
	m.lib.decodeOff(m.ptr, st)
	if err := ctx.Err(); err != nil {
		return backends.Output{}, err
	}
	rp := m.lib.offResult(st)
	if rp == 0 {
		return backends.Output{}, fmt.Errorf("sherpa: no result")
	}
	defer m.lib.destroyOffRes(rp)
	res := (*offResult)(native.Ptr(rp))
	text := strings.TrimSpace(native.GoString(native.Ptr(res.Text)))
	if l := strings.Trim(native.GoString(native.Ptr(res.Lang)), "<|>"); lang == "" && len(l) >= 2 && len(l) <= 3 {
		lang = l // SenseVoice's detected language tag, <|en|>
	}
	toks, times := cStrings(res.TokensArr, int(res.Count)), cFloats(res.Timestamps, int(res.Count))
	words := tokenWords(toks, times, dur)
	if m.cfg.fam.name == FamilyParaformer {
		words = paraformerWords(toks, times, dur)
	}
	return marshalASR(audio.ASRResult{Text: text, Duration: dur, Language: lang, Segments: audio.Segments(words), Words: words})
}

// minOfflineSamples is the shortest audio (0.1 s) an offline recognizer
// decodes; shorter audio is the empty transcript.
const minOfflineSamples = SampleRate / 10

func marshalASR(r audio.ASRResult) (backends.Output, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return backends.Output{}, err
	}
	return backends.Output{JSON: b}, nil
}

// language is the transcript language a recognizer reports ("en" unless
// the model's metadata says otherwise).
func (c *config) language() string {
	for _, info := range c.infos {
		if l := info.Meta["language"]; len(l) == 2 {
			return strings.ToLower(l)
		}
	}
	return "en"
}

// floatSamples copies PCM16 into C memory as floats in [-1, 1).
func floatSamples(s []int16) unsafe.Pointer {
	p := native.Malloc(4 * max(1, len(s)))
	f := unsafe.Slice((*float32)(p), max(1, len(s)))
	for i, v := range s {
		f[i] = float32(v) / 32768
	}
	return p
}

func cStrings(arr uintptr, n int) []string {
	if arr == 0 || n <= 0 {
		return nil
	}
	out := make([]string, n)
	for i, p := range unsafe.Slice((*uintptr)(native.Ptr(arr)), n) {
		out[i] = native.GoString(native.Ptr(p))
	}
	return out
}

func cFloats(arr uintptr, n int) []float32 {
	if arr == 0 || n <= 0 {
		return nil
	}
	return append([]float32(nil), unsafe.Slice((*float32)(native.Ptr(arr)), n)...)
}

// tokenWords folds tokens with their start times into words: a token that
// begins with SentencePiece's "▁" or a space starts a word. A word ends
// where the next begins (the last at the audio's end). Without timestamps
// there are no words.
func tokenWords(tokens []string, times []float32, dur float64) []audio.Word {
	if len(times) != len(tokens) {
		return nil
	}
	var out []audio.Word
	for i, t := range tokens {
		start := math.Round(float64(times[i])*1000) / 1000
		start = max(0, min(dur, start))
		piece := strings.TrimLeft(t, "▁ ")
		if len(out) == 0 || piece != t {
			if len(out) > 0 {
				out[len(out)-1].End = max(out[len(out)-1].Start, start)
			}
			if piece == "" {
				continue
			}
			out = append(out, audio.Word{Word: piece, Start: start, End: dur})
			continue
		}
		out[len(out)-1].Word += piece
	}
	return out
}

// paraformerWords folds Paraformer's tokens into words as its vocabulary
// spells them (FunASR's): a token ending in "@@" goes on into the next
// one; any other ends its word; a CJK character is a word of its own.
// A word ends where the next begins (the last at the audio's end).
func paraformerWords(tokens []string, times []float32, dur float64) []audio.Word {
	if len(times) != len(tokens) {
		return nil
	}
	var out []audio.Word
	open := false // the last word goes on (its token ended in "@@")
	for i, t := range tokens {
		start := max(0, min(dur, math.Round(float64(times[i])*1000)/1000))
		piece, more := strings.CutSuffix(t, "@@")
		if piece == "" {
			continue
		}
		if open && len(out) > 0 {
			out[len(out)-1].Word += piece
		} else {
			if len(out) > 0 {
				out[len(out)-1].End = max(out[len(out)-1].Start, start)
			}
			out = append(out, audio.Word{Word: piece, Start: start, End: dur})
		}
		open = more
	}
	return out
}

// asrFields is an ASR request's checked fields: the language it answers
// with (lang), the one its recognizer is picked by (recLang), and the
// hotwords resolved against the model.
type asrFields struct {
	in            asrInput
	lang, recLang string
	hotwords      string
}

// asrFields decodes and checks an ASR request's fields, the same way for
// files, uploads on streaming models and live sessions; plain requests
// (files and uploads) also refuse the fields only a live session takes.
func (m *model) asrFields(req backends.Request, plain bool) (asrFields, error) {
	var f asrFields
	if err := audio.DecodeStrict(req.Input, &f.in); err != nil {
		return f, err
	}
	if plain {
		if err := f.in.CheckPlain("sherpa"); err != nil {
			return f, err
		}
	}
	var err error
	if f.lang, f.recLang, err = m.cfg.requestLanguage(f.in.Language); err != nil {
		return f, err
	}
	f.hotwords, err = m.cfg.hotwordsFor(f.in.Hotwords)
	return f, err
}

// decodeUpload decodes a plain request's audio at the models' rate; its
// header's duration is checked against max_seconds before any decoding
// (CONTRACT.md audio.duration-limit), and decoding stops when ctx ends.
func (m *model) decodeUpload(ctx context.Context, req backends.Request, f asrFields) (audio.Audio, error) {
	a, err := audio.DecodeInput(ctx, req, audio.Want{Rate: SampleRate, MaxSeconds: float64(m.cfg.opts.MaxSeconds), RawRate: f.in.SampleRate})
	if err != nil {
		return a, fmt.Errorf("sherpa: %w", err)
	}
	return a, nil
}
