package pocketsphinx

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// sentences is speech with a pause after each sentence, longer than the
// CMN pass (adaptSamples).
const sentences = "Turn on the kitchen lights. Set a timer for ten minutes. Open the garage door. What is the weather like today? Call my sister at six o'clock."

// TestStreamDeltasAsDecoded: a streamed upload's utterances go out as
// transcript deltas while the rest is still decoding (the first before
// the last piece), the deltas concatenate to the transcript exactly, and
// the result is the non-streamed answer's (but for streamed). On main the
// whole transcript went out as one chunk after the decode.
func TestStreamDeltasAsDecoded(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	wav := speak(t, sentences)
	plain := transcribe(t, s, wav)
	pieces, firstAt := 0, 0
	afterPiece = func(n int) { pieces = n }
	defer func() { afterPiece = nil }()
	var deltas []audio.TranscriptDelta
	var last json.RawMessage
	out, err := s.Infer(context.Background(), backends.Request{Data: wav, Stream: true}, func(b json.RawMessage) error {
		last = append(json.RawMessage(nil), b...)
		if !strings.Contains(string(b), `"delta"`) {
			return nil
		}
		var d audio.TranscriptDelta
		if err := json.Unmarshal(b, &d); err != nil {
			return err
		}
		if firstAt == 0 {
			firstAt = pieces
		}
		deltas = append(deltas, d)
		return nil
	})
	afterPiece = nil
	if err != nil {
		t.Fatal(err)
	}
	if string(last) != string(out.JSON) {
		t.Fatalf("last chunk %s, want the result %s", last, out.JSON)
	}
	var r audio.ASRResult
	if err := json.Unmarshal(out.JSON, &r); err != nil {
		t.Fatal(err)
	}
	var cat strings.Builder
	for _, d := range deltas {
		cat.WriteString(d.Delta)
	}
	if len(deltas) < 2 || firstAt == 0 || firstAt >= pieces {
		t.Fatalf("%d deltas, the first after piece %d of %d: want several, the first before the decode's end", len(deltas), firstAt, pieces)
	}
	if cat.String() != r.Text || !r.Streamed {
		t.Fatalf("deltas %+v concatenate to %q, transcript %q (streamed %v)", deltas, cat.String(), r.Text, r.Streamed)
	}
	r.Streamed = false
	b, _ := json.Marshal(r)
	p, _ := json.Marshal(plain)
	if string(b) != string(p) {
		t.Fatalf("streamed result %s, plain %s", b, p)
	}
	// Word times count from the start of the audio: flite starts
	// speaking within its first half second (on main the times of an
	// upload longer than the CMN pass were shifted seconds late and
	// clamped at the end).
	if w := r.Words; len(w) == 0 || w[0].Start > 0.5 || w[len(w)-1].End > r.Duration {
		t.Fatalf("words %+v in %v s", w, r.Duration)
	}
}

// TestEndpointerIndependentOfSplit: the cuts depend on the samples alone,
// not on how they are split into pieces (uploads go in quarter seconds,
// live turns in appends of any size), and a pause cuts the utterance
// only after speech.
func TestEndpointerIndependentOfSplit(t *testing.T) {
	tone := func(n int) []int16 {
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(8000 * ((i/20)%2*2 - 1))
		}
		return out
	}
	var pcm []int16
	pcm = append(pcm, make([]int16, SampleRate)...) // silence first: no cut
	pcm = append(pcm, tone(SampleRate/2)...)
	pcm = append(pcm, make([]int16, SampleRate/2)...)
	pcm = append(pcm, tone(SampleRate/20)...) // too short to be cut
	pcm = append(pcm, make([]int16, SampleRate/2)...)
	pcm = append(pcm, tone(SampleRate)...)
	pcm = append(pcm, make([]int16, SampleRate/10)...) // too short a pause
	pcm = append(pcm, tone(SampleRate/2)...)
	pcm = append(pcm, make([]int16, SampleRate)...)
	cuts := func(step int) []int {
		var e endpointer
		var out []int
		for off := 0; off < len(pcm); {
			piece := pcm[off:min(off+step, len(pcm))]
			k, cut := e.next(piece)
			off += k
			if cut {
				out = append(out, off)
			}
		}
		return out
	}
	want := cuts(pieceSamples)
	// speech ends at 1.5 s and 4.15 s; each cut comes 200 ms of quiet
	// (smoothed over 30 ms) after it.
	if len(want) != 2 || want[0] < 1.7*SampleRate || want[0] > 1.75*SampleRate || want[1] < 4.35*SampleRate || want[1] > 4.4*SampleRate {
		t.Fatalf("cuts %v (samples)", want)
	}
	for _, step := range []int{1, 7, 320, 480, 4001, len(pcm)} {
		if got := cuts(step); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("pieces of %d: cuts %v, want %v", step, got, want)
		}
	}
}
