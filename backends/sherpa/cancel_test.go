package sherpa

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// hookCounter cancels a request at the first of its points and counts
// each point reached after the cancel.
type hookCounter struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	at     string         // the point that cancels
	after  map[string]int // points reached after the cancel
	done   bool
}

func (h *hookCounter) hit(point string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		h.after[point]++
		return
	}
	if point == h.at {
		h.done = true
		h.cancel()
	}
}

// TestCancelStops (sherpa.cancel): for every family, a request whose
// context ends mid-way stops at the next point the binding controls and
// answers context.Canceled: a TTS generation synthesises no sentence
// after the one in hand (the progress callback returns 0); a streaming
// recognizer decodes no chunk after the one in progress, in a live
// session and on the file route; an offline recognizer or a diarization
// whose context ended before the library's call does not make it (the
// call itself cannot be interrupted: the audio's max_seconds bounds it).
func TestCancelStops(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testHook = nil })
	for _, name := range SyntheticNames {
		fam := families[synthetic[name].opts["family"].(string)]
		t.Run(name, func(t *testing.T) {
			s := open(t, e, root, name, "")
			run := func(at string, req backends.Request, emit func(h *hookCounter) backends.Emit) *hookCounter {
				t.Helper()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				h := &hookCounter{cancel: cancel, at: at, after: map[string]int{}}
				testHook = h.hit
				defer func() { testHook = nil }()
				var em backends.Emit
				if emit != nil {
					em = emit(h)
				}
				_, err := s.Infer(ctx, req, em)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled at %s: %v, want context.Canceled", at, err)
				}
				if !h.done {
					t.Fatalf("never reached %s", at)
				}
				return h
			}
			switch {
			case fam.task == "tts":
				req := backends.Request{Input: []byte(`{"text":"First sentence here. A second one follows. Then a third. And a fourth."}`), Stream: true}
				chunks := 0
				h := run("", req, func(h *hookCounter) backends.Emit {
					return func(json.RawMessage) error {
						chunks++
						h.mu.Lock()
						if !h.done {
							h.done = true
							h.cancel()
						}
						h.mu.Unlock()
						return nil
					}
				})
				if chunks != 1 || h.after["tts-piece"] != 0 {
					t.Errorf("after the cancel: %d chunks in all, %d more sentences synthesised", chunks, h.after["tts-piece"])
				}
			case fam.streaming():
				h := run("online-decoded", backends.Request{Data: wav}, nil)
				if h.after["online-decoded"] != 0 {
					t.Errorf("file route: %d chunks decoded after the cancel", h.after["online-decoded"])
				}
				live := &backends.LiveReplay{Pieces: append(pieces(a, 200), backends.LivePiece{Commit: true})}
				h = run("online-decoded", backends.Request{Live: live}, func(*hookCounter) backends.Emit { return func(json.RawMessage) error { return nil } })
				if h.after["online-decoded"] != 0 {
					t.Errorf("live: %d chunks decoded after the cancel", h.after["online-decoded"])
				}
			case fam.task == "diarization":
				run("diarize", backends.Request{Data: wav}, nil)
			default:
				run("offline-decode", backends.Request{Data: wav}, nil)
			}
		})
	}
}
