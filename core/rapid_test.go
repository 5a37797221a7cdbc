package core

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"pgregory.net/rapid"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(label string, n int) int { return rapid.IntRange(0, n-1).Draw(c.t, label) }

var rapidOptions = []Options{
	{},
	{MaxLoadedModels: 2, IdleTimeout: 20_000},
	{MemoryBudgetMB: 250, SerializeColdLoads: true, DefaultAdmissionTimeout: 6000, LoadBackoff: 4000, LoadBackoffMax: 9000},
	{MaxLoadedModels: 1, AdmissionCeiling: 5000, LoadBackoff: 1500},
}

// TestRapidMachine lets rapid choose every next event among all that can
// happen (requests and managers on three models, bulk unloads, completions
// and failures of every backend step, timeouts, disconnects, ticks,
// shutdown), checks the invariants and the client-visible reference model
// after every step, drains to quiescence, and replays the trace.
//
// SLUICE_RAPID_CHECKS sets -rapid.checks for runners that cannot pass test
// flags (make mutation's rapid check runs through gremlins, which takes
// only GOFLAGS, so it sets 5000 here, as make test does with the flag).
func TestRapidMachine(t *testing.T) {
	if n := os.Getenv("SLUICE_RAPID_CHECKS"); n != "" {
		if err := flag.Set("rapid.checks", n); err != nil {
			t.Fatalf("SLUICE_RAPID_CHECKS: %v", err)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		opts := rapidOptions[rapid.IntRange(0, len(rapidOptions)-1).Draw(rt, "options")]
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		w, err := runWorkload(rapidChooser{rt}, opts, steps)
		if err != nil {
			rt.Fatalf("%v", err)
		}
		if err := w.replay(opts); err != nil {
			rt.Fatalf("%v", err)
		}
	})
}
