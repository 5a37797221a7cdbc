package whisper

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// liveRun replays turns (each split into pieces of piece samples, at
// 16 kHz, then committed) on s and returns the events.
func liveRun(t *testing.T, s backends.Session, turns [][]int16, piece int) []backends.LiveEvent {
	t.Helper()
	var ps []backends.LivePiece
	for _, turn := range turns {
		for i := 0; i < len(turn); i += piece {
			ps = append(ps, backends.LivePiece{Samples: turn[i:min(len(turn), i+piece)], Rate: SampleRate})
		}
		ps = append(ps, backends.LivePiece{Commit: true})
	}
	var evs []backends.LiveEvent
	_, err := s.Infer(context.Background(), backends.Request{Input: json.RawMessage(`{"language":"en"}`), Live: &backends.LiveReplay{Pieces: ps}},
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
	return evs
}

// A live session's events depend on the turns' audio alone: the same
// turns split into 20 ms or 700 ms appends, on a fresh slot or after other
// requests, give the same partials and finals; every partial is the start
// of its turn's final (the deltas the server derives never need taking
// back); a short turn's final is the whole-file answer for its audio.
func TestLiveTurns(t *testing.T) {
	a, err := audio.ParseWAV(jfk(t))
	if err != nil {
		t.Fatal(err)
	}
	short := a.Samples[:2*SampleRate]
	turns := [][]int16{a.Samples, short}
	// A decode every 2 s of a turn, at most 5 s of unfrozen audio: jfk.wav
	// (11 s) freezes text before its end.
	opts := `{"oversubscribe":true,"live_step_ms":2000,"live_window_ms":5000}`
	s := open(t, spec(tiny(t), 1, opts))
	first := liveRun(t, s, turns, SampleRate/50)
	infer(t, s, jfk(t), `{}`)
	if again := liveRun(t, s, turns, SampleRate*7/10); !slices.Equal(first, again) {
		t.Fatalf("the same turns in other appends, after a request, gave other events:\n%+v\n%+v", first, again)
	}
	var finals []backends.LiveEvent
	partials := 0
	for i, e := range first {
		switch e.Kind {
		case backends.LiveFinal:
			if e.Turn != len(finals) {
				t.Fatalf("final %d is for turn %d", len(finals), e.Turn)
			}
			finals = append(finals, e)
		case backends.LivePartial:
			partials++
			var final string
			for _, f := range first[i:] {
				if f.Kind == backends.LiveFinal && f.Turn == e.Turn {
					final = f.Text
					break
				}
			}
			if e.Turn != len(finals) || e.Text == "" || !strings.HasPrefix(final, e.Text) {
				t.Errorf("partial %+v is not the start of its turn's final %q", e, final)
			}
		default:
			t.Fatalf("event %+v", e)
		}
	}
	if partials == 0 || len(finals) != 2 {
		t.Fatalf("%d partials, %d finals, want partials for jfk.wav and 2 finals: %+v", partials, len(finals), first)
	}
	whole, _ := infer(t, s, audio.WAV(SampleRate, short), `{"language":"en"}`)
	if finals[1].Text != whole.Text {
		t.Fatalf("the 2 s turn's final %q, its whole-file answer %q", finals[1].Text, whole.Text)
	}
}

func TestLiveOptions(t *testing.T) {
	for _, o := range []string{`{"live_step_ms":50}`, `{"live_step_ms":40000}`, `{"live_window_ms":2500}`, `{"live_step_ms":3000,"live_window_ms":4000}`, `{"live_window_ms":30000}`} {
		if err := New().Validate(spec(tiny(t), 1, o)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "live_") {
			t.Errorf("options %s: %v, want invalid naming the option", o, err)
		}
	}
	s := open(t, spec(tiny(t), 1, ""))
	_, err := s.Infer(context.Background(), backends.Request{Input: json.RawMessage(`{"vad_filter":true}`), Live: &backends.LiveReplay{}}, func(json.RawMessage) error { return nil })
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "vad_filter") {
		t.Fatalf("a live session with vad_filter: %v", err)
	}
}
