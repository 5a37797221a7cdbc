//go:build sluice_mutants

package trace

import (
	"bytes"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// TestMutantTracesRejected: every mutant's random traces include some the
// validator rejects (the per-mutant figures are in spec/mutants).
func TestMutantTracesRejected(t *testing.T) {
	for _, mu := range core.AllMutants() {
		caught := false
		for seed := uint64(1); seed <= 60 && !caught; seed++ {
			var buf bytes.Buffer
			o, err := Generate(&buf, GenOptions{Seed: seed, Steps: 150, Mutants: mu})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Validate(bytes.NewReader(buf.Bytes()), &o)
			caught = err != nil
		}
		if !caught {
			t.Errorf("mutant %s: no rejected trace in 60 seeds", mu)
		}
	}
}
