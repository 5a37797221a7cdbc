package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/backends/diarize/evalset"
)

// exampleSpec is the recording -example writes: two flite voices taking
// turns for about 30 s, from the test split's seed.
var exampleSpec = evalset.Spec{Name: "meeting", Speakers: 2, Recordings: 1, Seconds: 30, Seed: evalset.TestSeed*100 + 2}

// writeExample writes the example recording to path and its reference RTTM
// to path with the extension .rttm.
func writeExample(ctx context.Context, path string) error {
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		return err
	}
	defer g.Close(ctx)
	recs, err := g.Generate(ctx, exampleSpec)
	if err != nil {
		return err
	}
	rec := recs[0]
	if err := os.WriteFile(path, rec.WAV(), 0o644); err != nil {
		return err
	}
	ref := strings.TrimSuffix(path, ".wav") + ".rttm"
	if err := os.WriteFile(ref, []byte(rec.RTTM()), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%.1f s, 2 speakers) and its reference %s\n", path, rec.Seconds(), ref)
	return nil
}
