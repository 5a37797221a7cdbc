package pocketsphinx

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
)

// An upload too short to hold a word (10 samples) is the empty transcript,
// never an error.
func TestShortUploadIsEmptyTranscript(t *testing.T) {
	s, _, err := New().Open(context.Background(), spec(checkpoint(t), 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, n := range []int{1, 10, 160} {
		r := transcribe(t, s, audio.WAV(SampleRate, make([]int16, n)))
		if r.Text != "" || r.Duration != float64(int(float64(n)/SampleRate*1000+0.5))/1000 {
			t.Fatalf("%d samples: %+v", n, r)
		}
	}
}
