package check

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/spec/env"
)

// TestMakeTestBound is `make model-check` inside go test: the spec
// transcription and the real core, at both make-test bounds, with
// invariants, ticket rules, deadlock and liveness, refinement and the
// coverage cross-check; no violation.
func TestMakeTestBound(t *testing.T) {
	for _, name := range []string{"small", "small3"} {
		b, err := Bound(name)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		rep, err := RunBound(b, &out, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + out.String())
		if !rep.OK() {
			t.Fatalf("bound %s:\n%s", name, out.String())
		}
		if rep.Core.Refinements == 0 || rep.Core.States < 1000 || rep.Spec.States < 1000 {
			t.Fatalf("bound %s explored too little:\n%s", name, out.String())
		}
	}
}

// TestRefinementCatchesDrift: when the spec's constants differ from the
// core's options (the spec thinks two models may be resident), refinement
// finds the core step the spec does not allow, with a readable trace.
func TestRefinementCatchesDrift(t *testing.T) {
	b, _ := Bound("small")
	sys, err := NewCoreSystem(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	sys.P.MaxLoaded = 2
	sys.RefinementOnly = true
	rep := runCore(t, b, sys)
	if rep.Violation == nil || rep.Violation.Kind != "refinement" {
		t.Fatalf("no refinement violation: %v", rep.Violation)
	}
	trace := Counterexample(b, 0, rep)
	for _, want := range []string{"counterexample:", "SubmitRequest", "spec allows", "final state"} {
		if !strings.Contains(trace+rep.Violation.Detail, want) {
			t.Fatalf("counterexample lacks %q:\n%s\n%s", want, trace, rep.Violation.Detail)
		}
	}
	t.Log("\n" + trace)
}

// TestSetups: every initial state is registered, unloaded (or ready for a
// warm start) and the same for spec and core.
func TestSetups(t *testing.T) {
	b, _ := Bound("small")
	w := *b
	w.Warm = true
	setups, err := w.Setups()
	if err != nil {
		t.Fatal(err)
	}
	if len(setups) != 2 {
		t.Fatalf("%d warm setups, want 2 (none or one ready under the limit of one)", len(setups))
	}
	for _, bb := range []*env.Bound{b, &w} {
		sys, err := NewCoreSystem(bb, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sys.Roots(); err != nil {
			t.Fatal(err)
		}
	}
}
