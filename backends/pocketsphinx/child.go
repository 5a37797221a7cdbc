package pocketsphinx

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/childload"
)

// Loads that can end the process (CONTRACT.md engine.load-safety):
// PocketSphinx trusts its acoustic model's files past the checks resolve
// makes, and a damaged mdef, sendump or transition_matrices (cut short,
// emptied, wrong magic, huge counts, random bytes) ends the process inside
// ps_init: E_FATAL's exit(1) or a segmentation fault. So the first load of
// a model in this process is preceded by the same load and a decode of one
// second of silence in a child process (childload); a child that does not
// end normally makes the load invalid, and this process never hands the
// files to the library. An identical load (same spec, same files by size
// and modification time) is not probed again; the first load of a model
// costs a second decoder load in the child.
var prober = &childload.Prober{Env: "SLUICE_POCKETSPHINX_LOAD_CHILD", Timeout: 2 * time.Minute}

func init() { prober.Serve(childMain) }

// childMain is a child's whole life: open the spec, decode once, close.
func childMain(payload string) int {
	var spec backends.Spec
	if err := json.Unmarshal([]byte(payload), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "pocketsphinx child: spec:", err)
		return 2
	}
	ctx := context.Background()
	s, _, err := New().Open(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pocketsphinx child: open:", err)
		return 3
	}
	if _, err := s.Infer(ctx, backends.Request{Data: audio.WAV(SampleRate, make([]int16, SampleRate))}, nil); err != nil {
		fmt.Fprintln(os.Stderr, "pocketsphinx child: request:", err)
		return 4
	}
	if err := s.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pocketsphinx child: close:", err)
		return 5
	}
	return 0
}

// childCheck probes spec's load in a child unless this process is a
// child, or an identical load passed before.
func childCheck(ctx context.Context, spec backends.Spec, c config) error {
	if prober.InChild() {
		return nil
	}
	spec.Slots = 1
	payload, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	key := childload.Key(payload, c.hmm, c.lm, c.dict)
	if err := prober.Check(ctx, key, string(payload), "pocketsphinx: checkpoint "+c.name); err != nil {
		return fmt.Errorf("pocketsphinx: %w", err)
	}
	return nil
}
