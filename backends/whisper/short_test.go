package whisper

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// An upload too short to hold a word (10 samples, and up to 0.1 s) is the
// empty transcript, never an error: whisper's language detection fails on
// it (no mel frame) or reports a meaningless probability, so it is not
// asked to detect one; with a language named, whisper decodes it.
func TestShortUploadIsEmptyTranscript(t *testing.T) {
	s := open(t, spec(tiny(t), 1, ""))
	for _, n := range []int{1, 10, 160, minDetectSamples - 1} {
		for _, in := range []string{"", `{"language":"en"}`} {
			wav := audio.WAV(SampleRate, make([]int16, n))
			out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: json.RawMessage(in)}, nil)
			if err != nil {
				t.Fatalf("%d samples, input %q: %v", n, in, err)
			}
			var r audio.ASRResult
			if err := json.Unmarshal(out.JSON, &r); err != nil {
				t.Fatal(err)
			}
			want := ""
			if in != "" {
				want = "en"
			}
			if r.Text != "" || r.Language != want || r.LanguageProbability != 0 || r.Duration != round3(float64(n)/SampleRate) {
				t.Fatalf("%d samples, input %q: %s", n, in, out.JSON)
			}
		}
	}
	// From 0.1 s on, the language is detected.
	out, err := s.Infer(context.Background(), backends.Request{Data: audio.WAV(SampleRate, make([]int16, minDetectSamples))}, nil)
	var r audio.ASRResult
	if err == nil {
		err = json.Unmarshal(out.JSON, &r)
	}
	if err != nil || r.Language == "" || r.LanguageProbability < 0 || r.LanguageProbability > 1 {
		t.Fatalf("0.1 s: %s %v", out.JSON, err)
	}
}
