package espeak

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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

func init() { prober.Serve(childMain) }

// childMain is a child's whole life: open the spec, speak once, close.
func childMain(payload string) int {
	var spec backends.Spec
	if err := json.Unmarshal([]byte(payload), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "espeak child: spec:", err)
		return 2
	}
	ctx := context.Background()
	s, _, err := New().Open(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "espeak child: open:", err)
		return 3
	}
	if _, err := s.Infer(ctx, backends.Request{Input: []byte(`{"text":"Hello, this is a test."}`)}, nil); err != nil {
		fmt.Fprintln(os.Stderr, "espeak child: request:", err)
		return 4
	}
	if err := s.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "espeak child: close:", err)
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
	key := childload.Key(payload, c.data)
	if err := prober.Check(ctx, key, string(payload), "espeak: checkpoint "+c.name); err != nil {
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
