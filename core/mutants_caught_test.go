//go:build sluice_mutants

package core

import (
	"math/rand/v2"
	"testing"
)

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
