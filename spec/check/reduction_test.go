package check

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/coremodel"
	"github.com/sluice-dev/sluice/spec/env"
	"github.com/sluice-dev/sluice/spec/mc"
)

// TestTransitionReductions: leaving out the labels of clients and models
// interchangeable with earlier ones (env.Bound.LabelAll off) reaches
// exactly the same states, through fewer transitions. (At small3 and large
// too: `modelcheck -label-all` cross-checks by hand.)
func TestTransitionReductions(t *testing.T) {
	for _, name := range []string{"small"} {
		b, _ := Bound(name)
		all := *b
		all.LabelAll = true
		var res [2]*mc.Result
		for k, bb := range []*env.Bound{b, &all} {
			sys, err := NewCoreSystem(bb, 0)
			if err != nil {
				t.Fatal(err)
			}
			res[k] = runCore(t, bb, sys)
			if res[k].Verdict() != "ok" {
				t.Fatalf("%s: %v", name, res[k].Violation)
			}
		}
		if res[0].States != res[1].States || res[0].Transitions >= res[1].Transitions {
			t.Fatalf("%s: reduced %d states, %d transitions; every label %d states, %d transitions", name,
				res[0].States, res[0].Transitions, res[1].States, res[1].Transitions)
		}
		t.Logf("%s: %d states; %d transitions, %d with every label", name, res[0].States, res[0].Transitions,
			res[1].Transitions)
	}
}

// specStates records the spec states (abstractions of the core's states,
// with the budget) that a core exploration expands.
type specStates struct {
	*CoreSystem
	mu   sync.Mutex
	seen map[uint64]bool
}

func (s *specStates) ExpandState(st any) (mc.Expansion, error) {
	d := st.(*coremodel.Driver)
	fp := mc.Fingerprint(specKey(d.Abstract(d.Views()), d.Budget, s.class))
	s.mu.Lock()
	s.seen[fp] = true
	s.mu.Unlock()
	return s.CoreSystem.ExpandState(st)
}

// TestDeadValuesForgotten: the core's canonical key forgets what core
// leaves dead (the pool version of an unpublished model); exploring with
// the exact key finds more core states but exactly the same spec states, so
// forgetting lost no behaviour.
func TestDeadValuesForgotten(t *testing.T) {
	b, _ := Bound("small")
	var seen [2]map[uint64]bool
	var states [2]int64
	for k, exact := range []bool{false, true} {
		sys, err := NewCoreSystem(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		sys.ExactKey = exact
		w := &specStates{CoreSystem: sys, seen: map[uint64]bool{}}
		res, err := mc.Run(w, mc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict() != "ok" {
			t.Fatalf("exact=%v: %v", exact, res.Violation)
		}
		seen[k], states[k] = w.seen, res.States
	}
	if states[1] <= states[0] {
		t.Fatalf("the exact key found %d states, the reduced %d: nothing dead was forgotten", states[1], states[0])
	}
	if len(seen[0]) != len(seen[1]) {
		t.Fatalf("spec states: %d with the reduced key, %d with the exact key", len(seen[0]), len(seen[1]))
	}
	for fp := range seen[1] {
		if !seen[0][fp] {
			t.Fatal("the exact key reached a spec state the reduced key did not")
		}
	}
	t.Logf("core states: %d (exact key %d); spec states: %d", states[0], states[1], len(seen[0]))
}

// TestStepperMatchesStep: the spec's Stepper, which reuses its memory,
// finds the same outcomes as Step along random walks, and leaves its input
// alone.
func TestStepperMatchesStep(t *testing.T) {
	b, _ := Bound("small")
	sys, err := NewSpecSystem(b)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var w abstract.Stepper
	compared := 0
	for walk := 0; walk < 20; walk++ {
		roots, err := sys.Roots()
		if err != nil {
			t.Fatal(err)
		}
		st := roots[rng.IntN(len(roots))].State.(specState)
		for n := 0; n < 30; n++ {
			labels := b.Enabled(st.s, st.u, nil)
			if len(labels) == 0 {
				break
			}
			before := st.s.AppendExactKey(nil)
			for _, l := range labels {
				if isSubmission(l.Kind) {
					l.Ticket = st.s.NextID + 1
				}
				a := b.Action(st.s, l)
				compared++
				want, err1 := abstract.Step(st.s, a, sys.P)
				got, err2 := w.Step(st.s, a, sys.P)
				if (err1 == nil) != (err2 == nil) || len(want) != len(got) {
					t.Fatalf("%s: Step %d outcomes (%v), Stepper %d (%v)", b.Describe(l), len(want), err1, len(got), err2)
				}
				for k := range want {
					if !bytes.Equal(want[k].State.AppendExactKey(nil), got[k].State.AppendExactKey(nil)) ||
						!bytes.Equal(abstract.AppendEffectsKey(nil, want[k].Effects), abstract.AppendEffectsKey(nil, got[k].Effects)) {
						t.Fatalf("%s: outcome %d differs", b.Describe(l), k)
					}
				}
				if !bytes.Equal(before, st.s.AppendExactKey(nil)) {
					t.Fatalf("%s: the Stepper changed its input", b.Describe(l))
				}
			}
			l := labels[rng.IntN(len(labels))]
			if isSubmission(l.Kind) {
				l.Ticket = st.s.NextID + 1
			}
			outs, err := abstract.Step(st.s, b.Action(st.s, l), sys.P)
			if err != nil {
				t.Fatal(err)
			}
			st = specState{s: outs[rng.IntN(len(outs))].State, u: b.Consume(st.u, l)}
		}
	}
	if compared < 1000 {
		t.Fatalf("only %d steps compared", compared)
	}
}

// TestFastCompareAgreesWithKeys: refinement's field-by-field comparison of
// states and effects never calls equal what the keys tell apart, and it
// decides most comparisons (the keys are the fallback, not the rule).
func TestFastCompareAgreesWithKeys(t *testing.T) {
	fastCompare.verify = true
	defer func() { fastCompare.verify = false }()
	for _, name := range []string{"small", "large"} {
		b, _ := Bound(name)
		sys, err := NewCoreSystem(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		fastCompare.equal.Store(0)
		fastCompare.unequal.Store(0)
		fastCompare.refuted.Store(0)
		fastCompare.keyed.Store(0)
		res, err := mc.Run(sys, mc.Options{MaxStates: 20000})
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil {
			t.Fatalf("%s: %v", name, res.Violation)
		}
		eq, ne, bad, keyed := fastCompare.equal.Load(), fastCompare.unequal.Load(), fastCompare.refuted.Load(), fastCompare.keyed.Load()
		t.Logf("%s: %d states, %d refinement steps, %d comparisons equal, %d not, %d steps decided by the keys, %d equalities refuted by the keys",
			name, res.States, res.Refinements, eq, ne, keyed, bad)
		if bad != 0 {
			t.Fatalf("%s: %d field-by-field equalities refuted by the keys", name, bad)
		}
		if keyed > res.Refinements/10 {
			t.Fatalf("%s: %d of %d refinement steps fell back to the keys", name, keyed, res.Refinements)
		}
	}
}
