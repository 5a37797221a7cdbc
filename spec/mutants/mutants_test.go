//go:build sluice_mutants

package mutants

import (
	"bytes"
	"testing"
)

// TestEveryMutantCaught: the model checker and trace validation each catch
// every planted bug of core.
func TestEveryMutantCaught(t *testing.T) {
	var out bytes.Buffer
	res, err := Run(&out, Options{Traces: 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, r := range res {
		if !r.ModelCheck {
			t.Errorf("%s: the model checker misses it", r.Mutant)
		}
		if !r.TraceCheck {
			t.Errorf("%s: no random trace was rejected", r.Mutant)
		}
	}
}
