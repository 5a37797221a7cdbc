package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/whisper"
)

// measureFirstDelta is the whisper engine's streaming figure: on a 60 s clip (jfk.wav
// repeated) and the bench model, one slot, the time from the request to
// its first streamed segment (req.Stream with an emit: the engine's
// new-segment callback) beside the whole decode's time, n tries, printed
// as p50 and the ratio of each try.
func measureFirstDelta(dir string, speech []int16, n int) error {
	ctx := context.Background()
	spec := backends.Spec{Model: "bench", Task: "asr", Engine: whisper.Name, Checkpoint: dir, Options: []byte(`{"oversubscribe":true}`), Slots: 1}
	s, _, err := whisper.New().Open(ctx, spec)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	pcm := make([]int16, 60*16000)
	for i := range pcm {
		pcm[i] = speech[i%len(speech)]
	}
	req := backends.Request{Data: le16(pcm), Input: json.RawMessage(`{"sample_rate":16000,"language":"en"}`), Stream: true}
	var firsts, wholes []time.Duration
	var ratios []float64
	for range n {
		var first time.Duration
		deltas := 0
		t0 := time.Now()
		_, err := s.Infer(ctx, req, func(json.RawMessage) error {
			if deltas == 0 {
				first = time.Since(t0)
			}
			deltas++
			return nil
		})
		whole := time.Since(t0)
		if err != nil {
			return err
		}
		if deltas == 0 {
			return fmt.Errorf("a streamed decode of 60 s sent no delta")
		}
		firsts, wholes = append(firsts, first), append(wholes, whole)
		ratios = append(ratios, first.Seconds()/whole.Seconds())
	}
	slices.Sort(firsts)
	slices.Sort(wholes)
	slices.Sort(ratios)
	fmt.Printf("\nfirst streamed delta (60 s clip, bench model, 1 slot, %d tries): p50 %v of a p50 %v decode; first/whole per try %.2f..%.2f\n",
		n, firsts[len(firsts)/2].Round(time.Millisecond), wholes[len(wholes)/2].Round(time.Millisecond), ratios[0], ratios[len(ratios)-1])
	return nil
}
