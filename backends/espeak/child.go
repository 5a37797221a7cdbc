package espeak

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/internal/childload"
)

// Loads that can end the process (CONTRACT.md engine.load-safety): eSpeak
// NG trusts its data files, and a damaged en_dict, phontab, phonindex or
// phondata (wrong magic, huge counts, random bytes, cut short) is a
// segmentation fault inside espeak_ng_Initialize or the first synthesis,
// where Go's checks of the folder (resolve) cannot see it. So the first
// load of a data folder in this process is preceded by the same load and
// one synthesis in a child process (childload); a child that does not end
// normally makes the load invalid, and this process never initialises the
// library with that folder. An identical load (same spec, same files by
// size and modification time) is not probed again.
var prober = &childload.Prober{Env: "SLUICE_ESPEAK_LOAD_CHILD", Timeout: time.Minute}

// loader is a child's whole life: open the spec, speak once, close.
var loader = childload.Loader{
	Name: "espeak",
	Open: func(ctx context.Context, spec backends.Spec) (backends.Session, error) {
		s, _, err := New().Open(ctx, spec)
		return s, err
	},
	Request: func(backends.Session) backends.Request {
		return backends.Request{Input: []byte(`{"text":"Hello, this is a test."}`)}
	},
}

func init() { prober.Serve(loader.Main) }

// childCheck probes spec's load in a child unless this process is a
// child, or an identical load passed before.
func childCheck(ctx context.Context, spec backends.Spec, c config) error {
	if err := prober.CheckSpec(ctx, spec, "checkpoint "+c.name, childload.FilesKey(c.data)); err != nil {
		return fmt.Errorf("espeak: %w", err)
	}
	return nil
}

// CheckLoad runs the child load Open runs before a data folder's first
// load in this process (and nothing in this process): a harness checks a
// damaged checkpoint with it without making its folder the process's one
// eSpeak NG data folder.
func (e *Engine) CheckLoad(ctx context.Context, spec backends.Spec) error {
	c, err := resolve(spec)
	if err != nil {
		return err
	}
	return childCheck(ctx, spec, c)
}
