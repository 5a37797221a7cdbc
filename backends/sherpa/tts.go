package sherpa

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// speak runs a TTS request (audio.TTSRequest; see backends/audio). The
// text goes to the library in groups of whole sentences of at most
// groupChars bytes, one generate call each (its native memory is one
// group's synthesis, not the request's); the library synthesises
// sentence by sentence (max_num_sentences 1) and hands each through the
// progress callback: a stream emits it as a chunk at once; otherwise the
// pieces are joined. speed divides the length scale
// (the library's own mapping); the output is at the model's rate,
// resampled to the request's sample_rate. Cancellation: the callback
// returns 0 once ctx has ended, so the library stops after the sentence
// in progress, and no further group starts (a sentence itself cannot be
// interrupted; groups are bounded by groupChars).
func (m *model) speak(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	r, err := audio.ParseTTS(req.Input)
	if err != nil {
		return backends.Output{}, err
	}
	sid, err := m.cfg.speakerID(r.Voice)
	if err != nil {
		return backends.Output{}, err
	}
	speed := r.Speed
	if speed == 0 {
		speed = 1
	}
	var all []int16
	chunks := audio.NewChunkEmitter(ctx, emit, r)
	g := &generation{ctx: ctx, onPiece: func(p []float32) error {
		pcm := toPCM16(p)
		if req.Stream && emit != nil {
			return chunks.Write(m.cfg.rate, pcm)
		}
		all = append(all, pcm...)
		return nil
	}}
	var cs cstrings
	defer cs.free()
	gc := cAlloc[generationConfig]()
	defer freeC(unsafe.Pointer(gc))
	gc.Speed, gc.Sid, gc.SilenceScale = float32(speed), int32(sid), 1
	if sid < len(m.cfg.voiceLangs) && m.cfg.voiceLangs[sid] != "" {
		if ok, dir := espeakActiveHas(m.cfg.voiceLangs[sid]); !ok {
			return backends.Output{}, backends.InvalidParam("voice", "sherpa: voice %q speaks %s, but espeak-ng in this process reads %s (sherpa-onnx initializes it once, from the first voice loaded), which has no such voice", r.Voice, m.cfg.voiceLangs[sid], dir)
		}
		// A multi-language Kokoro speaks the voice's language (checked
		// against data_dir at load: espeak-ng aborts on a voice it lacks).
		gc.Extra = cs.of(`{"lang":"` + m.cfg.voiceLangs[sid] + `"}`)
	}
	key := registerGen(g)
	defer unregisterGen(key)
	// One generate call per group of sentences (groups.go): the library
	// holds a call's whole synthesis in native memory until it returns.
	spoke := false
	for _, text := range sentenceGroups(r.Text, groupChars) {
		if err := ctx.Err(); err != nil {
			return backends.Output{}, err
		}
		hook("tts-group")
		out := m.lib.ttsGenerate(m.ptr, native.Ptr(cs.of(text)), unsafe.Pointer(gc), m.lib.progress, key)
		if out != 0 {
			m.lib.destroyAudio(out)
			spoke = true
		}
		if err := ctx.Err(); err != nil {
			return backends.Output{}, err
		}
		if g.err != nil {
			return backends.Output{}, g.err
		}
	}
	if !spoke {
		return backends.Output{}, backends.Invalidf("sherpa: %s could not synthesise the text (no known phonemes in it?)", m.cfg.name)
	}
	if req.Stream && emit != nil {
		return backends.Output{}, chunks.Close()
	}
	return audio.EncodeTTS(ctx, r, m.cfg.rate, all)
}

// speakerID maps a request's voice to a speaker: "" and OpenAI's stock
// names mean speaker 0.
func (c *config) speakerID(v string) (int, error) {
	if audio.IsDefaultVoice(v) {
		return 0, nil
	}
	var names []string
	for i := range c.speakers {
		n := c.speakerName(i)
		if strings.EqualFold(n, v) {
			return i, nil
		}
		names = append(names, n)
	}
	return 0, audio.UnknownVoice("sherpa", v, c.name, names)
}

func toPCM16(p []float32) []int16 {
	out := make([]int16, len(p))
	for i, v := range p {
		if v != v {
			continue // NaN from a broken model: silence
		}
		x := math.Round(float64(v) * 32767)
		out[i] = int16(max(-32768, min(32767, x)))
	}
	return out
}

var _ = fmt.Sprintf
