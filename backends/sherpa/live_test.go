package sherpa

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// pieces cuts a at rate into pieces of ms milliseconds.
func pieces(a audio.Audio, ms int) []backends.LivePiece {
	n := a.Rate * ms / 1000
	var out []backends.LivePiece
	for i := 0; i < len(a.Samples); i += n {
		out = append(out, backends.LivePiece{Samples: a.Samples[i:min(len(a.Samples), i+n)], Rate: a.Rate})
	}
	return out
}

// TestStreamingPartialsGrow: a live session on each streaming family
// (Zipformer2 transducer, NeMo cache-aware CTC, Paraformer) gives partials as the audio arrives, each extending the one before
// (greedy search only appends), and a final that extends the last
// partial; the same turn in other piece sizes and at another input rate
// has the same final, and so does the file route; a second turn's
// transcript does not depend on the first.
func TestStreamingPartialsGrow(t *testing.T) {
	root := testRoot(t)
	for _, name := range []string{StreamingSynthetic, OnlineNemoCTCSynthetic, OnlineParaformerSynthetic} {
		t.Run(name, func(t *testing.T) { streamingPartialsGrow(t, root, name) })
	}
}

func streamingPartialsGrow(t *testing.T, root, name string) {
	s := open(t, New(Config{}), root, name, "")
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	run := func(ps []backends.LivePiece) []backends.LiveEvent {
		t.Helper()
		var evs []backends.LiveEvent
		_, err := s.Infer(context.Background(), backends.Request{Live: &backends.LiveReplay{Pieces: ps}}, func(c json.RawMessage) error {
			var ev backends.LiveEvent
			if err := json.Unmarshal(c, &ev); err != nil {
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
	commit := func(ps []backends.LivePiece) []backends.LivePiece {
		return append(ps, backends.LivePiece{Commit: true})
	}
	evs := run(commit(pieces(a, 100)))
	partials, last := 0, ""
	for _, ev := range evs[:len(evs)-1] {
		if ev.Kind != backends.LivePartial || !strings.HasPrefix(ev.Text, last) {
			t.Fatalf("partial %q after %q: want a growing hypothesis", ev.Text, last)
		}
		last = ev.Text
		partials++
	}
	final := evs[len(evs)-1]
	if final.Kind != backends.LiveFinal || !strings.HasPrefix(final.Text, last) || final.Text == "" || partials < 5 {
		t.Fatalf("final %+v after %d partials (last %q)", final, partials, last)
	}
	t.Logf("%d partials, final %q", partials, final.Text)
	other := run(commit(pieces(a.To(8000), 37)))
	if f := other[len(other)-1]; f.Text != run(commit(pieces(a.To(8000), 250)))[len(run(commit(pieces(a.To(8000), 250))))-1].Text {
		t.Errorf("8 kHz input: the final depends on the piece size")
	}
	out, err := s.Infer(context.Background(), backends.Request{Data: wav}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res audio.ASRResult
	if err := json.Unmarshal(out.JSON, &res); err != nil || res.Text != final.Text {
		t.Errorf("file route: %q, live final %q (%v)", res.Text, final.Text, err)
	}
	// Two turns, the second a copy of the first: the same transcript.
	two := run(append(commit(pieces(a, 100)), commit(pieces(a, 100))...))
	var finals []string
	for _, ev := range two {
		if ev.Kind == backends.LiveFinal {
			finals = append(finals, ev.Text)
		}
	}
	if len(finals) != 2 || finals[0] != final.Text || finals[1] != final.Text {
		t.Errorf("two turns: %q, want %q twice", finals, final.Text)
	}
}
