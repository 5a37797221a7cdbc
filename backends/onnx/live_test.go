package onnx

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// TestLiveSpeechEvents: Silero over 20 ms live pieces at 24 kHz reports
// each spoken sentence of the padded recording once, started and stopped
// near the sentence's span (CONTRACT.md live.turn-detection).
func TestLiveSpeechEvents(t *testing.T) {
	s := open(t, checkpoint(t))
	wav, spans := padded(t)
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	pcm := audio.Resample(a.Samples, a.Rate, 24000)
	var pieces []backends.LivePiece
	for off := 0; off < len(pcm); off += 480 {
		pieces = append(pieces, backends.LivePiece{Samples: pcm[off:min(off+480, len(pcm))], Rate: 24000})
	}
	var evs []backends.LiveEvent
	_, err = s.Infer(context.Background(), backends.Request{Live: &backends.LiveReplay{Pieces: pieces}, Input: json.RawMessage(`{"min_silence_ms":500,"speech_pad_ms":100}`)},
		func(b json.RawMessage) error {
			var ev backends.LiveEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				return err
			}
			evs = append(evs, ev)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2*len(spans) {
		t.Fatalf("events %+v, want a start and a stop per sentence %v", evs, spans)
	}
	for i, span := range spans {
		start, stop := evs[2*i], evs[2*i+1]
		if start.Kind != backends.LiveSpeechStarted || stop.Kind != backends.LiveSpeechStopped {
			t.Fatalf("events %+v", evs)
		}
		if d := math.Abs(float64(start.AudioMS)/1000 - span[0]); d > 0.3 {
			t.Errorf("sentence %d starts at %.2f s, speech_started at %d ms", i, span[0], start.AudioMS)
		}
		if d := math.Abs(float64(stop.AudioMS)/1000 - span[1]); d > 0.4 {
			t.Errorf("sentence %d ends at %.2f s, speech_stopped at %d ms", i, span[1], stop.AudioMS)
		}
	}
	if r := detect(t, s, wav); len(r.Segments) != len(spans) { // the whole-file path after a live session
		t.Errorf("whole-file segments after a live session: %+v", r.Segments)
	}
}
