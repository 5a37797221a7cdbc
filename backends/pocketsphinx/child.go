package pocketsphinx

import (
	"context"
	"fmt"
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

// loader is a child's whole life: open the spec, decode once, close.
var loader = childload.Loader{
	Name: "pocketsphinx",
	Open: func(ctx context.Context, spec backends.Spec) (backends.Session, error) {
		s, _, err := New().Open(ctx, spec)
		return s, err
	},
	Request: func(backends.Session) backends.Request {
		return backends.Request{Data: audio.WAV(SampleRate, make([]int16, SampleRate))}
	},
}

func init() { prober.Serve(loader.Main) }

// childCheck probes spec's load in a child unless this process is a
// child, or an identical load passed before.
func childCheck(ctx context.Context, spec backends.Spec, c config) error {
	if err := prober.CheckSpec(ctx, spec, "checkpoint "+c.name, childload.FilesKey(c.hmm, c.lm, c.dict)); err != nil {
		return fmt.Errorf("pocketsphinx: %w", err)
	}
	return nil
}
