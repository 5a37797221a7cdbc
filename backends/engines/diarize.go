package engines

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/diarize/evalset"
)

// DiarizationSets are the recordings of the diarization rows of the
// matched-output check: a 10-second two-speaker and a 15-second
// three-speaker recording from the evaluation-set generator (their own
// seed, shared with neither split), the second asked for num_speakers.
var DiarizationSets = []evalset.Spec{
	{Name: "validate-2spk", Speakers: 2, Recordings: 1, Seconds: 10, Seed: 901},
	{Name: "validate-3spk", Speakers: 3, Recordings: 1, Seconds: 15, Seed: 902},
}

// diarizationInputs adds the "diarization" requests to out.
func diarizationInputs(ctx context.Context, out map[string][]backends.Request) error {
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		return fmt.Errorf("diarization inputs: %w", err)
	}
	defer g.Close(ctx)
	for i, sp := range DiarizationSets {
		recs, err := g.Generate(ctx, sp)
		if err != nil {
			return err
		}
		for _, r := range recs {
			var in json.RawMessage
			if i == 1 {
				in, _ = json.Marshal(audio.DiarizationRequest{NumSpeakers: sp.Speakers})
			}
			out["diarization"] = append(out["diarization"], backends.Request{ID: "diar-" + r.Name, Input: in, Data: r.WAV()})
		}
	}
	return nil
}
