package whisper

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// The VAD filter: with vad_filter a request's audio goes through Sluice's
// own Silero VAD v5 session (backends/onnx, ONNX Runtime) before whisper,
// and whisper decodes only the speech regions it finds, joined with
// VADGap of silence between them; every time in the answer (segments,
// words, streamed deltas) is mapped back to the original audio. Why this
// and not whisper.cpp 1.9.1's built-in VAD: docs/design.md "Whisper's VAD
// filter" (it needs a ggml Silero file no package here ships; measured
// with a zero-weight file of the real shape, its pass costs 0.17 s of CPU
// per minute of audio against this session's 0.21 s, both small beside
// the decode they save).

// VADParams are the filter's segmentation settings: faster-whisper's
// vad_filter defaults (a pause shorter than 2 s is speech, each region
// padded by 400 ms), so ordinary pauses inside speech are never cut and
// only long silences are.
var VADParams = onnx.VADParams{Threshold: 0.5, MinSpeechMS: 250, MinSilenceMS: 2000, SpeechPadMS: 400}

// VADGap is the silence put between two speech regions (samples at
// SampleRate): 0.1 s, as whisper.cpp's built-in filter does, so whisper
// sees a boundary.
const VADGap = SampleRate / 10

// VADFile is the Silero model's name inside a checkpoint built by
// VADRecipe.
const VADFile = "silero_vad_v5.onnx"

// VADRecipe is Recipe's checkpoint with the Silero VAD v5 model at
// sileroPath copied in (option vad_file) and vad_filter on by default
// when filter is true.
func VADRecipe(name string, d synth.Dims, seed uint64, maxSlots int, sileroPath string, filter bool) (catalogue.Recipe, error) {
	r, err := Recipe(name, d, seed, maxSlots)
	if err != nil {
		return r, err
	}
	r.Manifest.Options = fmt.Appendf(nil, `{"file":%q,"vad_file":%q,"vad_filter":%v}`, ModelFile, VADFile, filter)
	r.Files = append(r.Files, catalogue.Source{Dest: VADFile, Src: sileroPath})
	return r, nil
}

// vadSpan is one speech region: from (samples) in the original audio, at
// at in the filtered audio, n samples long.
type vadSpan struct{ from, at, n int }

// vadMap maps times of the filtered audio back to the original.
type vadMap []vadSpan

// orig returns the original time of t seconds of the filtered audio: the
// same offset into its region; a time in a gap after a region is that
// region's end.
func (m vadMap) orig(t float64) float64 {
	if len(m) == 0 {
		return t
	}
	x := int(t*SampleRate + 0.5)
	sp := m[0]
	for _, s := range m[1:] {
		if x < s.at {
			break
		}
		sp = s
	}
	off := min(max(0, x-sp.at), sp.n)
	return round3(float64(sp.from+off) / SampleRate)
}

// filter returns the speech of samples (the regions the VAD finds, joined
// with VADGap silences) and the map back. whole is true when nothing is
// cut (the original is decoded unchanged, so a clip without a long
// silence gets the same answer as without the filter); speech is empty
// when there is none.
func (s *session) filter(ctx context.Context, samples []int16) (speech []int16, m vadMap, whole bool, err error) {
	regions, err := s.vad.Speech(ctx, samples, VADParams)
	if err != nil {
		return nil, nil, false, fmt.Errorf("whisper: VAD: %w", err)
	}
	// Only silences of VADParams.MinSilenceMS or more are cut: inside the
	// clip the VAD merges shorter pauses already; at its ends a shorter
	// lead-in or tail stays.
	minSilence := SampleRate * VADParams.MinSilenceMS / 1000
	if n := len(regions); n > 0 {
		if regions[0][0] < minSilence {
			regions[0][0] = 0
		}
		if len(samples)-regions[n-1][1] < minSilence {
			regions[n-1][1] = len(samples)
		}
	}
	if len(regions) == 1 && regions[0][0] == 0 && regions[0][1] == len(samples) {
		return samples, nil, true, nil
	}
	for i, r := range regions {
		if i > 0 {
			speech = append(speech, make([]int16, VADGap)...)
		}
		m = append(m, vadSpan{from: r[0], at: len(speech), n: r[1] - r[0]})
		speech = append(speech, samples[r[0]:r[1]]...)
	}
	return speech, m, false, nil
}

// useVAD resolves a request's vad_filter against the checkpoint.
func (s *session) useVAD(r audio.AudioRequest) (bool, error) {
	if r.VADFilter == nil {
		return s.cfg.vadFilter, nil
	}
	if *r.VADFilter && s.cfg.vadFile == "" {
		return false, backends.InvalidParam("vad_filter", "whisper: vad_filter: checkpoint %s has no VAD model (option vad_file names a Silero VAD v5 .onnx)", s.cfg.name)
	}
	return *r.VADFilter, nil
}

// transcribeFiltered is transcribe behind the VAD filter: whisper decodes
// the speech alone, the answer's times are the original audio's and its
// duration the whole clip's. No speech at all is an empty answer, without
// a decode.
func (s *session) transcribeFiltered(ctx context.Context, samples []int16, d decodeReq, dur float64, sink func(audio.TranscriptDelta) error) (audio.ASRResult, error) {
	speech, m, whole, err := s.filter(ctx, samples)
	if err != nil {
		return audio.ASRResult{}, err
	}
	if whole {
		return s.transcribe(ctx, samples, d, dur, sink)
	}
	if len(speech) == 0 {
		res := audio.ASRResult{Language: d.lang, Duration: dur}
		if d.translate {
			res.Task = audio.TaskTranslate
		}
		return res, nil
	}
	var mapped func(audio.TranscriptDelta) error
	if sink != nil {
		mapped = func(t audio.TranscriptDelta) error {
			t.Start, t.End = m.orig(t.Start), m.orig(t.End)
			return sink(t)
		}
	}
	res, err := s.transcribe(ctx, speech, d, round3(float64(len(speech))/SampleRate), mapped)
	if err != nil {
		return res, err
	}
	for i := range res.Segments {
		g := &res.Segments[i]
		g.Start, g.End = m.orig(g.Start), m.orig(g.End)
	}
	for i := range res.Words {
		w := &res.Words[i]
		w.Start, w.End = m.orig(w.Start), m.orig(w.End)
	}
	res.Duration = dur
	return res, nil
}
