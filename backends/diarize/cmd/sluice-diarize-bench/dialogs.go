package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/diarize"
	"github.com/sluice-dev/sluice/backends/diarize/der"
	"github.com/sluice-dev/sluice/backends/diarize/evalset"
)

// dialogs scores n generated dialogs (evalset.Dialogs, seed) once per
// options set given (each a JSON object of engine options; "{}" is the
// engine's defaults), so a change is measured beside its baseline in the
// same run.
func dialogs(n int, seed uint64, models string, optionSets []string, oracle bool) error {
	ctx := context.Background()
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		return err
	}
	defer g.Close(ctx)
	if err := g.AddEspeak(ctx, filepath.Join(models, catalogue.EspeakEn)); err != nil {
		return fmt.Errorf("%w (make models builds the espeak-en checkpoint)", err)
	}
	t0 := time.Now()
	ds, err := g.Dialogs(ctx, seed, n)
	if err != nil {
		return err
	}
	secs := 0.0
	for _, d := range ds {
		secs += d.Seconds()
	}
	fmt.Printf("%d dialogs (seed %d, voices %v): %.0f s of audio, generated in %.1f s\n", len(ds), seed, g.DialogVoices(), secs, time.Since(t0).Seconds())
	model := catalogue.DefaultSources("").SileroModel()
	for _, opts := range optionSets {
		if !json.Valid([]byte(opts)) {
			return fmt.Errorf("options %q: not JSON", opts)
		}
		sess, _, err := diarize.New(diarize.Config{}).Open(ctx, backends.Spec{Task: diarize.Task, Engine: diarize.Name, Checkpoint: model, Options: json.RawMessage(opts), Slots: 1})
		if err != nil {
			return err
		}
		t1 := time.Now()
		sc, err := evalset.ScoreDialogs(ctx, ds, func(ctx context.Context, d evalset.Dialog) ([]der.Turn, error) {
			q := audio.DiarizationRequest{}
			if oracle {
				q.NumSpeakers = d.Speakers
			}
			return diarizeOnce(ctx, sess, d.Recording, q)
		})
		_ = sess.Close(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("options %s (num_speakers given: %v): %s (%.1f s)\n", opts, oracle, sc, time.Since(t1).Seconds())
		for k := 1; k <= 4; k++ {
			fmt.Printf("  %d speakers: %s\n", k, sc.Only(k))
		}
		for _, w := range sc.Wrong {
			fmt.Printf("  wrong count %s\n", w)
		}
	}
	return nil
}
