package flite

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// TestVoicesSayTheRateSpoken: each voice's listing names it, as the
// model's default, at the rate a synthesis then really has.
func TestVoicesSayTheRateSpoken(t *testing.T) {
	var _ backends.VoiceLister = New()
	for v := range Voices {
		got, err := New().Voices(spec(v, 1))
		if err != nil || len(got) != 1 || got[0].ID != v || !got[0].Default || len(got[0].Languages) == 0 {
			t.Fatalf("%s: %+v, %v", v, got, err)
		}
		out, err := open(t, spec(v, 1)).Infer(context.Background(), tts("Hello there."), nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := audio.ParseWAV(out.Data)
		if err != nil || a.Rate != got[0].SampleRate {
			t.Fatalf("%s: listed %d Hz, spoke %d Hz (%v)", v, got[0].SampleRate, a.Rate, err)
		}
	}
}

// TestInvalidSaysItOnce: an engine refusal reads as its own message, with
// no "invalid: " before it, and still matches ErrInvalid.
func TestInvalidSaysItOnce(t *testing.T) {
	_, err := New().Voices(spec("klingon", 1))
	if !errors.Is(err, backends.ErrInvalid) || !strings.HasPrefix(err.Error(), "flite: unknown voice") {
		t.Fatalf("%v", err)
	}
}
