package pocketsphinx

import (
	"context"
	"encoding/json"
	"fmt"
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
// (24 kHz, resampled), with partials (the utterances ended at its pause)
// before the final, and the
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
	wav := speak(t, "Turn on the kitchen lights. Open the garage door.")
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

// liveEvents runs a live session over pieces and returns its events.
func liveEvents(t *testing.T, s backends.Session, pieces []backends.LivePiece) []backends.LiveEvent {
	t.Helper()
	var evs []backends.LiveEvent
	_, err := s.Infer(context.Background(), backends.Request{Live: &backends.LiveReplay{Pieces: pieces}, Input: json.RawMessage(`{}`)}, func(b json.RawMessage) error {
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

// serverDeltas is the server's rule (server/internal/realtime onEngine,
// CONTRACT.md live.transcribe) applied to one turn's events: the deltas
// its partials let out, then the closing delta of its final, and whether
// the final revised what the deltas had said (no closing delta then).
func serverDeltas(evs []backends.LiveEvent) (deltas []string, revised bool) {
	said, prev := "", ""
	for _, ev := range evs {
		words := strings.Fields(ev.Text)
		if ev.Kind == backends.LiveFinal {
			all := strings.Join(words, " ")
			if !strings.HasPrefix(all, said) || said != "" && len(all) > len(said) && all[len(said)] != ' ' {
				return deltas, true
			}
			if len(all) > len(said) {
				deltas = append(deltas, all[len(said):])
			}
			return deltas, false
		}
		p := strings.Fields(prev)
		prev = ev.Text
		n := 0
		for n < len(words)-1 && n < len(p) && words[n] == p[n] {
			n++
		}
		stable := strings.Join(words[:n], " ")
		if !strings.HasPrefix(stable, said) || len(stable) == len(said) || said != "" && stable[len(said)] != ' ' {
			continue
		}
		deltas = append(deltas, stable[len(said):])
		said = stable
	}
	return deltas, false
}

// TestLiveDeltasAddUp (live.transcribe): a turn of several sentences in
// 20 ms appends gets partials before its commit, each a word prefix of
// the completed transcript (settled utterances only, never a hypothesis
// the second pass revises), so the deltas the server derives from them
// concatenate to the transcript exactly and none is taken back; the same
// turn split into other appends gives the same events. On main the
// partials were the decoder's running hypothesis, which the final
// revised: the server's deltas then said words the transcript does not
// have.
func TestLiveDeltasAddUp(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	wav := speak(t, "Set a timer for ten minutes. Open the garage door. Call my sister at six o'clock.")
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	pcm24 := audio.Resample(a.Samples, a.Rate, 24000)
	pieces := chunks(pcm24, 24000)
	pieces[len(pieces)-1].Commit = true
	evs := liveEvents(t, s, pieces)
	if n := len(evs); n < 2 || evs[n-1].Kind != backends.LiveFinal || evs[0].Kind != backends.LivePartial {
		t.Fatalf("events %+v, want partials then the final", evs)
	}
	final := strings.Fields(evs[len(evs)-1].Text)
	for _, ev := range evs[:len(evs)-1] {
		w := strings.Fields(ev.Text)
		if ev.Kind != backends.LivePartial || len(w) > len(final) || strings.Join(w, " ") != strings.Join(final[:len(w)], " ") {
			t.Fatalf("partial %q is not a word prefix of the final %q", ev.Text, evs[len(evs)-1].Text)
		}
	}
	deltas, revised := serverDeltas(evs)
	if got := strings.Join(deltas, ""); revised || len(deltas) < 2 || got != strings.Join(final, " ") {
		t.Fatalf("deltas %q (revised %v) concatenate to %q, transcript %q", deltas, revised, got, evs[len(evs)-1].Text)
	}
	// Appends of 1 s: the same events.
	for _, n := range []int{24000} {
		var other []backends.LivePiece
		for off := 0; off < len(pcm24); off += n {
			other = append(other, backends.LivePiece{Samples: pcm24[off:min(off+n, len(pcm24))], Rate: 24000})
		}
		other[len(other)-1].Commit = true
		if got := liveEvents(t, s, other); fmt.Sprint(got) != fmt.Sprint(evs) {
			t.Fatalf("appends of %d samples: %+v, 20 ms appends: %+v", n, got, evs)
		}
	}
}
