//go:build sluice_mutants

package check

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// TestMutantCounterexample: a planted bug yields the shortest
// counterexample, printed step by step.
func TestMutantCounterexample(t *testing.T) {
	b, _ := Bound("small")
	var out bytes.Buffer
	rep, err := RunBound(b, &out, Options{CoreOnly: true, Mutants: core.MutLostWakeup})
	if err != nil {
		t.Fatal(err)
	}
	v := rep.Core.Violation
	if v == nil || v.Name != "QueueProgress" || len(rep.Core.Path) != 3 {
		t.Fatalf("want QueueProgress in 3 steps:\n%s", out.String())
	}
	if !strings.Contains(rep.Trace, "LoadDone m") || !strings.Contains(rep.Trace, "failed") {
		t.Fatalf("counterexample:\n%s", rep.Trace)
	}
	t.Log("\n" + rep.Trace)
}
