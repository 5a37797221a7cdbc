package espeak

import (
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// TestVoicesListTheData: the listing holds the checkpoint's voice files,
// the model's voice first and default, each at the rate spoken, and every
// listed voice is one a request may name.
func TestVoicesListTheData(t *testing.T) {
	dir := checkpoint(t, nil)
	var _ backends.VoiceLister = New()
	got, err := New().Voices(spec(dir, 1))
	if err != nil || len(got) < 2 || !got[0].Default {
		t.Fatalf("%d voices: %v", len(got), err)
	}
	s, _, err := New().Open(t.Context(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	w, err := audio.ParseWAV(say(t, s, "Hello.", ""))
	if err != nil || w.Rate != got[0].SampleRate {
		t.Fatalf("listed %d Hz, spoke %d Hz (%v)", got[0].SampleRate, w.Rate, err)
	}
	seen := map[string]bool{}
	for i, v := range got {
		if v.ID == "" || seen[v.ID] || (i > 0 && v.Default) {
			t.Fatalf("voice %d: %+v", i, v)
		}
		seen[v.ID] = true
	}
	last := got[len(got)-1].ID
	in, _ := json.Marshal(audio.TTSRequest{Text: "Hi.", Voice: last})
	if _, err := s.Infer(t.Context(), backends.Request{Input: in}, nil); err != nil {
		t.Fatalf("listed voice %q refused: %v", last, err)
	}
}
