package core

import (
	"encoding/json"
	"math/rand/v2"
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
func TestRapidMachine(t *testing.T) {
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

// TestMutantsCaught switches on each planted bug and requires the random
// workload checks to find it within a bounded number of seeded runs. A
// check that catches no mutant is not a check.
func TestMutantsCaught(t *testing.T) {
	// The same seeds pass without mutants, so a catch is the mutant's doing.
	for seed := uint64(0); seed < 300; seed++ {
		opts := rapidOptions[seed%uint64(len(rapidOptions))]
		if _, err := runWorkload(randChooser{rand.New(rand.NewPCG(seed, 7))}, opts, 150); err != nil {
			t.Fatalf("seed %d fails without mutants: %v", seed, err)
		}
	}
	for _, mu := range AllMutants() {
		t.Run(mu.String(), func(t *testing.T) {
			for seed := uint64(0); seed < 3000; seed++ {
				opts := rapidOptions[seed%uint64(len(rapidOptions))]
				opts.Mutants = mu
				c := randChooser{rand.New(rand.NewPCG(seed, 7))}
				_, err := runWorkload(c, opts, 150)
				if err != nil {
					t.Logf("caught with seed %d: %v", seed, firstLine(err.Error()))
					return
				}
			}
			t.Fatalf("mutant %s survived 3000 seeded workloads", mu)
		})
	}
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
