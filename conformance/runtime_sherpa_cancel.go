package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/core/runtime"
)

// checkSherpaCancel (sherpa.cancel): on a one-slot model of each TTS
// family, a streamed synthesis of four sentences cancelled when its first
// chunk arrives ends as a cancellation with no chunk after it (the
// library's progress callback stops the generation); on each streaming
// recognizer, a live session cancelled at its first partial ends as a
// cancellation; in both the one slot is free again at once: the next
// request is answered.
func checkSherpaCancel(ctx context.Context, rr *runtimeRun) error {
	tts := []string{sherpa.PiperSynthetic, sherpa.KokoroSynthetic, sherpa.KokoroMultiSynthetic, sherpa.KittenSynthetic, sherpa.MatchaSynthetic, sherpa.MatchaVocosSynthetic}
	live := []string{sherpa.StreamingSynthetic, sherpa.OnlineNemoCTCSynthetic, sherpa.OnlineParaformerSynthetic}
	rt, root, done, err := sherpaRuntime(rr, append(append([]string(nil), tts...), live...), nil)
	if err != nil {
		return err
	}
	defer done()
	speech, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		return fmt.Errorf("%w: jfk.wav (make deps): %w", errUnavailable, err)
	}
	a, err := audio.ParseWAV(speech)
	if err != nil {
		return err
	}
	// cancelAtFirst runs req on id, cancelling at its first chunk, and
	// returns how many chunks came in all.
	cancelAtFirst := func(id string, req backends.Request) (int, error) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		chunks := 0
		ended := make(chan error, 1)
		first := make(chan struct{})
		go func() {
			_, err := rt.Infer(cctx, id, req, runtime.InferOptions{Emit: func(json.RawMessage) error {
				chunks++
				if chunks == 1 {
					close(first)
					<-cctx.Done() // the cancel lands while the engine waits on this chunk
				}
				return nil
			}})
			ended <- err
		}()
		if err := rr.await("the first chunk of "+id, first); err != nil {
			return 0, err
		}
		if err := rr.cancelled("request on "+id, cancel, ended); err != nil {
			return 0, err
		}
		return chunks, nil
	}
	for _, n := range tts {
		id := n + "." + rr.tag
		if _, err := rt.Apply(ctx, id, sherpaSpec(root, n, "tts", 1)); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		req := backends.Request{Input: []byte(`{"text":"The first sentence. The second one. A third sentence. And the fourth."}`), Stream: true}
		chunks, err := cancelAtFirst(id, req)
		if err != nil {
			return err
		}
		if chunks != 1 {
			return fmt.Errorf("%s: %d chunks after a cancel at the first", n, chunks-1)
		}
		if _, err := rt.Infer(ctx, id, backends.Request{Input: []byte(`{"text":"Still here."}`)}, runtime.InferOptions{}); err != nil {
			return fmt.Errorf("%s: the slot after the cancel: %w", n, err)
		}
	}
	for _, n := range live {
		id := n + "." + rr.tag
		if _, err := rt.Apply(ctx, id, sherpaSpec(root, n, "asr", 1)); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		var ps []backends.LivePiece
		for i := 0; i < len(a.Samples); i += a.Rate / 5 {
			ps = append(ps, backends.LivePiece{Samples: a.Samples[i:min(len(a.Samples), i+a.Rate/5)], Rate: a.Rate})
		}
		if _, err := cancelAtFirst(id, backends.Request{Live: &backends.LiveReplay{Pieces: append(ps, backends.LivePiece{Commit: true})}}); err != nil {
			return err
		}
		if _, err := rt.Infer(ctx, id, backends.Request{Data: tone(1, 3)}, runtime.InferOptions{}); err != nil {
			return fmt.Errorf("%s: the slot after the cancel: %w", n, err)
		}
	}
	return nil
}
