package flite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// longSentence is one sentence of about 280 characters: one unit for
// SplitSentences, one flite_text_to_wave call.
var longSentence = strings.TrimSuffix(strings.Repeat("the committee will review every application before the end of the month and ", 4), "and ") + "then."

func slow(text string) backends.Request {
	b, _ := json.Marshal(audio.TTSRequest{Text: text, Speed: 0.25})
	return backends.Request{ID: "r", Input: b}
}

// TestCancelStopsInsideSentence (CONTRACT.md engine.cancel): a request
// whose context ends while the vocoder makes a long sentence at speed 0.25
// stops at the next 0.1 s of audio (the callback is not called again) with
// the context's error, and the session's next answer is byte-identical to
// a fresh session's. On main the sentence ran to its end (one native call).
func TestCancelStopsInsideSentence(t *testing.T) {
	fresh := open(t, spec("slt", 1))
	chunks := 0
	chunkHook = func(n int) { chunks = n }
	defer func() { chunkHook = nil }()
	want, err := fresh.Infer(context.Background(), slow(longSentence), nil)
	if err != nil {
		t.Fatal(err)
	}
	if chunks < 20 {
		t.Fatalf("the whole sentence streamed %d chunks, want many (is streaming_info attached?)", chunks)
	}
	s := open(t, spec("slt", 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	chunkHook = func(n int) {
		seen = n
		if n == 3 {
			cancel()
		}
	}
	_, err = s.Infer(ctx, slow(longSentence), nil)
	chunkHook = nil
	if !errors.Is(err, context.Canceled) || seen != 3 {
		t.Fatalf("cancelled at chunk 3: err %v, the vocoder went on to chunk %d", err, seen)
	}
	got, err := s.Infer(context.Background(), slow(longSentence), nil)
	if err != nil || !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("after a cancel: %d bytes %v, a fresh session %d bytes", len(got.Data), err, len(want.Data))
	}
}

// TestStreamingChangesNoSample: the streaming hook only reports the
// vocoder's progress: a voice without it synthesises the same samples.
func TestStreamingChangesNoSample(t *testing.T) {
	s := open(t, spec("slt", 1)).(*session)
	if s.stream == nil {
		t.Fatal("slt has no stream")
	}
	plain, err := s.lib.newVoiceObject("slt")
	if err != nil {
		t.Fatal(err)
	}
	defer s.lib.delVoice(plain)
	for _, stretch := range []float64{1, 4} {
		s.lib.setStretch(s.voice, stretch)
		s.lib.setStretch(plain, stretch)
		s.stream.begin(context.Background())
		a, _, err := s.lib.synth(s.voice, longSentence)
		s.stream.end()
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := s.lib.synth(plain, longSentence)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) == 0 || len(a) != len(b) || !equalSamples(a, b) {
			t.Fatalf("stretch %v: streamed %d samples, plain %d, or they differ", stretch, len(a), len(b))
		}
	}
}

func equalSamples(a, b []int16) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
