//go:build sluice_mutants

package check

import (
	"bytes"
	"io"
	"slices"
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

// TestPerStateInvariantsReportAsPerTransition: for every planted bug, the
// default run (state invariants once per state, then a second run checking
// every transition once a violation is found) reports the same violation
// with the same counterexample as checking every transition from the
// start; a per-state run alone may not (bulk_one_by_one: refinement in 3
// steps instead of LeaseConservation in 2).
func TestPerStateInvariantsReportAsPerTransition(t *testing.T) {
	b, _ := Bound("small")
	for _, mu := range core.AllMutants() {
		var out bytes.Buffer
		def, err := RunBound(b, &out, Options{CoreOnly: true, Mutants: mu})
		if err != nil {
			t.Fatal(err)
		}
		all, err := RunBound(b, io.Discard, Options{CoreOnly: true, Mutants: mu, PerTransitionInvariants: true})
		if err != nil {
			t.Fatal(err)
		}
		d, a := def.Core, all.Core
		if d.Violation == nil || a.Violation == nil || *d.Violation != *a.Violation || d.Root != a.Root ||
			!slices.Equal(d.Path, a.Path) || def.Trace != all.Trace {
			t.Fatalf("%s: default %v %v, every transition %v %v\n%s", mu, d.Violation, d.Path, a.Violation, a.Path, out.String())
		}
		if !strings.Contains(out.String(), "checking every transition for the shortest counterexample") {
			t.Fatalf("%s: no second run:\n%s", mu, out.String())
		}
	}
}
