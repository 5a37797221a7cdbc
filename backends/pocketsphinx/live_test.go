package pocketsphinx

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// chunks cuts samples into 20 ms pieces at rate.
func chunks(samples []int16, rate int) []backends.LivePiece {
	n := rate / 50
	var out []backends.LivePiece
	for off := 0; off < len(samples); off += n {
		out = append(out, backends.LivePiece{Samples: samples[off:min(off+n, len(samples))], Rate: rate})
	}
	return out
}

// TestLiveTurns: a live session decodes a turn as its 20 ms pieces arrive
// (24 kHz, resampled), with partial hypotheses before the final, and the
// final of each committed turn; a cleared turn emits nothing, and the
// whole-file path on the same session is unchanged afterwards
// (CONTRACT.md live.transcribe).
func TestLiveTurns(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	wav := speak(t, "Turn on the kitchen lights.")
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	pcm24 := audio.Resample(a.Samples, a.Rate, 24000)
	var pieces []backends.LivePiece
	pieces = append(pieces, chunks(pcm24, 24000)...)
	pieces[len(pieces)-1].Commit = true
	pieces = append(pieces, chunks(pcm24[:len(pcm24)/2], 24000)...)
	pieces = append(pieces, backends.LivePiece{Clear: true})
	pieces = append(pieces, chunks(pcm24, 24000)...)
	pieces[len(pieces)-1].Commit = true
	pieces = append(pieces, chunks(pcm24[:4800], 24000)...) // dropped by the end of input
	var evs []backends.LiveEvent
	_, err = s.Infer(context.Background(), backends.Request{Live: &backends.LiveReplay{Pieces: pieces}, Input: json.RawMessage(`{}`)}, func(b json.RawMessage) error {
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
	var finals []backends.LiveEvent
	partials := 0
	for _, ev := range evs {
		switch ev.Kind {
		case backends.LiveFinal:
			finals = append(finals, ev)
		case backends.LivePartial:
			if len(finals) == 0 {
				partials++
			}
		}
	}
	if partials == 0 {
		t.Errorf("no partial hypothesis before the first final: %+v", evs)
	}
	if len(finals) != 2 || finals[0].Turn != 0 || finals[1].Turn != 1 {
		t.Fatalf("finals %+v, want turns 0 and 1", finals)
	}
	for _, f := range finals {
		for _, w := range []string{"turn", "kitchen", "lights"} {
			if !strings.Contains(f.Text, w) {
				t.Errorf("turn %d: transcript %q lacks %q", f.Turn, f.Text, w)
			}
		}
	}
	if r := transcribe(t, s, wav); !strings.Contains(r.Text, "kitchen") {
		t.Errorf("whole-file transcript after a live session: %q", r.Text)
	}
}

// TestLiveSessionsIndependent: the same audio in the same pieces gives the
// same events in a live session whatever the session ran before (E1):
// every live session starts from the fresh decoder's CMN. On main the live
// CMN's running mean carried over from earlier requests.
func TestLiveSessionsIndependent(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	wav := speak(t, "Set a timer for ten minutes. Open the garage door.")
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	live := func() string {
		pieces := chunks(a.Samples, a.Rate)
		pieces[len(pieces)-1].Commit = true
		var b strings.Builder
		_, err := s.Infer(context.Background(), backends.Request{Live: &backends.LiveReplay{Pieces: pieces}, Input: json.RawMessage(`{}`)}, func(m json.RawMessage) error {
			b.Write(m)
			b.WriteByte('\n')
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first := live()
	transcribe(t, s, speak(t, "Call my sister at six o'clock. What is the weather like today? Play some music in the living room."))
	if again := live(); again != first {
		t.Fatalf("the same live session after other requests:\n%s\nfirst:\n%s", again, first)
	}
}
