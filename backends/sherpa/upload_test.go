package sherpa

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// longUpload is jfk.wav three times with 3 s of silence after each
// (about 42 s at 16 kHz): longer than the endpoint's utterance-length
// rule (20 s), so every streaming family ends a segment inside it.
func longUpload(t *testing.T) []byte {
	t.Helper()
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	a = a.To(SampleRate)
	var pcm []int16
	for range 3 {
		pcm = append(pcm, a.Samples...)
		pcm = append(pcm, make([]int16, 3*SampleRate)...)
	}
	return audio.WAV(SampleRate, pcm)
}

// TestUploadDeltas: a streamed upload on each streaming family emits its
// endpointed segments as the stream decodes them (the first delta comes
// before the last chunk is decoded), the deltas join to the final text
// byte for byte, the final chunk is the result marked Streamed, and the
// transcript is the same bytes streamed or not, and again after another
// request on the session.
func TestUploadDeltas(t *testing.T) {
	root := testRoot(t)
	wav := longUpload(t)
	for _, name := range []string{StreamingSynthetic, OnlineNemoCTCSynthetic, OnlineParaformerSynthetic} {
		t.Run(name, func(t *testing.T) { uploadDeltas(t, root, name, wav) })
	}
}

func uploadDeltas(t *testing.T, root, name string, wav []byte) {
	s := open(t, New(Config{}), root, name, "")
	decoded, firstAt := 0, -1
	testHook = func(point string) {
		if point == "online-decoded" {
			decoded++
		}
	}
	t.Cleanup(func() { testHook = nil })
	var deltas []audio.TranscriptDelta
	var final json.RawMessage
	out, err := s.Infer(context.Background(), backends.Request{Data: wav, Stream: true}, func(c json.RawMessage) error {
		if final != nil {
			t.Errorf("a chunk after the final result: %s", c)
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(c, &probe); err != nil {
			return err
		}
		if _, ok := probe["delta"]; !ok {
			final = append(json.RawMessage(nil), c...)
			return nil
		}
		var d audio.TranscriptDelta
		if err := json.Unmarshal(c, &d); err != nil {
			return err
		}
		if firstAt < 0 {
			firstAt = decoded
		}
		deltas = append(deltas, d)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var res audio.ASRResult
	if err := json.Unmarshal(final, &res); err != nil || string(final) != string(out.JSON) || !res.Streamed {
		t.Fatalf("final chunk %s, output %s (%v): want the same result, streamed", final, out.JSON, err)
	}
	if len(deltas) < 2 || firstAt < 0 || firstAt >= decoded {
		t.Fatalf("%d deltas, the first after %d of %d chunks: want segments before the end", len(deltas), firstAt, decoded)
	}
	var joined strings.Builder
	last := 0.0
	for _, d := range deltas {
		if d.Start < last || d.End < d.Start || d.End > res.Duration {
			t.Errorf("delta %+v after %.3f s (duration %.3f)", d, last, res.Duration)
		}
		last = d.End
		joined.WriteString(d.Delta)
	}
	if joined.String() != res.Text || res.Text == "" {
		t.Fatalf("deltas join to %q, final text %q", joined.String(), res.Text)
	}
	t.Logf("%d deltas, the first after %d of %d chunks", len(deltas), firstAt, decoded)
	testHook = nil
	plain := func() audio.ASRResult {
		t.Helper()
		out, err := s.Infer(context.Background(), backends.Request{Data: wav}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r audio.ASRResult
		if err := json.Unmarshal(out.JSON, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if p := plain(); p.Text != res.Text || p.Streamed {
		t.Errorf("not streamed: %q (streamed %v), streamed %q", p.Text, p.Streamed, res.Text)
	}
	// Another request in between (a short one) changes nothing.
	if _, err := s.Infer(context.Background(), backends.Request{Data: audio.WAV(SampleRate, make([]int16, SampleRate))}, nil); err != nil {
		t.Fatal(err)
	}
	if p := plain(); p.Text != res.Text {
		t.Errorf("after another request: %q, want %q", p.Text, res.Text)
	}
}

// TestUploadCancelAtDelta (sherpa.cancel): a streamed upload whose
// context ends as its first delta goes out decodes no chunk after it,
// emits nothing more and answers context.Canceled.
func TestUploadCancelAtDelta(t *testing.T) {
	root := testRoot(t)
	wav := longUpload(t)
	t.Cleanup(func() { testHook = nil })
	for _, name := range []string{StreamingSynthetic, OnlineNemoCTCSynthetic, OnlineParaformerSynthetic} {
		t.Run(name, func(t *testing.T) {
			s := open(t, New(Config{}), root, name, "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := &hookCounter{cancel: cancel, after: map[string]int{}}
			testHook = h.hit
			defer func() { testHook = nil }()
			chunks := 0
			_, err := s.Infer(ctx, backends.Request{Data: wav, Stream: true}, func(json.RawMessage) error {
				chunks++
				h.mu.Lock()
				h.done = true
				h.mu.Unlock()
				cancel()
				return nil
			})
			if !errors.Is(err, context.Canceled) || chunks != 1 || h.after["online-decoded"] != 0 {
				t.Errorf("%v after %d chunks, %d decoded after the cancel: want context.Canceled after one", err, chunks, h.after["online-decoded"])
			}
		})
	}
}
