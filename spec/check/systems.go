// Package check puts the pieces together: the bounds of `make model-check`
// and `make model-check-large`, the spec transcription and the real core as
// systems for the model checker (package mc), the refinement check between
// them, readable counterexamples and the printed report.
//
// Threading rule: Systems are safe for the checker's concurrent Expand
// (and Derive, ExpandState) calls: they share only read-only bounds, build
// their states per call, and take per-call scratch memory from a pool.
package check

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/coremodel"
	"github.com/sluice-dev/sluice/spec/env"
	"github.com/sluice-dev/sluice/spec/mc"
)

// specState is a state of the spec system: the spec state and the budget.
type specState struct {
	s *abstract.State
	u env.Budget
}

// SpecSystem explores the spec transcription itself.
type SpecSystem struct {
	B      *env.Bound
	P      *abstract.Params
	setups [][]env.Label
	class  func(id string) byte // symmetry classes (nil: no symmetry)
}

// NewSpecSystem returns the spec inside bound b.
func NewSpecSystem(b *env.Bound) (*SpecSystem, error) {
	if b.MergeBuild {
		return nil, fmt.Errorf("check: bound %s merges builds, which only the core system supports", b.Name)
	}
	setups, err := b.Setups()
	if err != nil {
		return nil, err
	}
	return &SpecSystem{B: b, P: b.Params(), setups: setups, class: classOf(b)}, nil
}

// classOf returns the symmetry classes of b's models for canonical keys,
// or nil without symmetry.
func classOf(b *env.Bound) func(id string) byte {
	if !b.Symmetry {
		return nil
	}
	return b.ClassOf(b.SymmetryClasses())
}

// specKey is the canonical key of a spec state with a budget, shared by the
// spec system and the coverage check of the core system.
func specKey(s *abstract.State, u env.Budget, class func(string) byte) []byte {
	var k []byte
	if class != nil {
		k = s.AppendSymmetricKey(nil, class)
	} else {
		k = s.AppendKey(nil, false)
	}
	return u.AppendKey(k)
}

func (sy *SpecSystem) key(st specState) uint64 {
	return mc.Fingerprint(specKey(st.s, st.u, sy.class))
}

// replay rebuilds the spec state at the end of path (labels carry the
// outcome they took).
func (sy *SpecSystem) replay(root int, path []env.Label) (specState, error) {
	s := &abstract.State{}
	for _, l := range sy.setups[root] {
		outs, err := abstract.Step(s, sy.B.Action(s, l), sy.P)
		if err != nil {
			return specState{}, err
		}
		s = outs[0].State
	}
	u := sy.B.Start()
	for _, l := range path {
		outs, err := abstract.Step(s, sy.B.Action(s, l), sy.P)
		if err != nil {
			return specState{}, err
		}
		if int(l.Alt) >= len(outs) {
			return specState{}, fmt.Errorf("spec: replay of %s: no outcome %d", sy.B.Describe(l), l.Alt)
		}
		s, u = outs[l.Alt].State, sy.B.Consume(u, l)
	}
	return specState{s: s, u: u}, nil
}

// Roots implements mc.System.
func (sy *SpecSystem) Roots() ([]mc.Root, error) {
	var roots []mc.Root
	for _, setup := range sy.setups {
		s := &abstract.State{}
		for _, l := range setup {
			outs, err := abstract.Step(s, sy.B.Action(s, l), sy.P)
			if err != nil {
				return nil, err
			}
			s = outs[0].State
		}
		st := specState{s: s, u: sy.B.Start()}
		roots = append(roots, mc.Root{FP: sy.key(st), State: st})
	}
	return roots, nil
}

// Expand implements mc.System.
func (sy *SpecSystem) Expand(root int, path []env.Label, x any) (mc.Expansion, error) {
	if x == nil {
		st, err := sy.replay(root, path)
		if err != nil {
			return mc.Expansion{}, err
		}
		x = st
	}
	st := x.(specState)
	var exp mc.Expansion
	exp.Waiting = st.s.Waiting()
	exp.ShutdownPending = st.s.Shutdown && !st.s.ShutdownSent
	self := sy.key(st)
	for _, l := range sy.B.Enabled(st.s, st.u, nil) {
		exp.Fair = exp.Fair || l.Fair
		if isSubmission(l.Kind) {
			l.Ticket = st.s.NextID + 1
		}
		outs, err := abstract.Step(st.s, sy.B.Action(st.s, l), sy.P)
		if err != nil {
			return exp, fmt.Errorf("spec: %s: %w", sy.B.Describe(l), err)
		}
		u := sy.B.Consume(st.u, l)
		for k, o := range outs {
			next := specState{s: o.State, u: u}
			l.Alt = uint8(k)
			succ := mc.Succ{Label: l, State: next, FP: sy.key(next)}
			succ.Stutter = succ.FP == self
			exp.Checks += int64(abstract.NumInvariants)
			if err := abstract.CheckInvariants(o.State, sy.P); err != nil {
				succ.Err = invariantViolation("invariant", err)
			}
			exp.Succs = append(exp.Succs, succ)
		}
	}
	return exp, nil
}

func isSubmission(k core.EventKind) bool {
	return k == core.EvSubmitRequest || k == core.EvSubmitManager || k == core.EvSubmitBulkUnload
}

func invariantViolation(kind string, err error) *mc.Violation {
	type unwrapper interface{ Unwrap() []error }
	errs := []error{err}
	if u, ok := err.(unwrapper); ok {
		errs = u.Unwrap()
	}
	var names, details []string
	for _, e := range errs {
		if ie, ok := e.(*core.InvariantError); ok {
			names = append(names, ie.Name)
			details = append(details, ie.Error())
		} else {
			names = append(names, "?")
			details = append(details, e.Error())
		}
	}
	if len(errs) == 1 {
		if ie, ok := errs[0].(*core.InvariantError); ok {
			details[0] = ie.Detail
		}
	}
	return &mc.Violation{Kind: kind, Name: strings.Join(names, "+"), Detail: strings.Join(details, "; ")}
}

// Refines checks one core step against the spec: the abstracted successor
// next, with the effects the core emitted, must be an outcome of the spec
// action of l from abs, or (with no effects) abs itself: a stutter.
func Refines(b *env.Bound, p *abstract.Params, abs *abstract.State, l env.Label, now int64, next *abstract.State,
	effs []abstract.Effect) *mc.Violation {
	return refines(new(scratch), b, p, abs, nil, l, now, next, effs)
}

// refines is Refines with abs's key (AppendKey without symmetry) when the
// caller has it already (nil: computed here), and reused key buffers.
//
// It first compares states and effects field by field (abstract.SameKey,
// abstract.SameEffects: true only when the keys are equal), which decides
// almost every step without encoding a key; what that does not accept is
// decided by the keys, exactly as before.
func refines(sc *scratch, b *env.Bound, p *abstract.Params, abs *abstract.State, absKey []byte, l env.Label,
	now int64, next *abstract.State, effs []abstract.Effect) *mc.Violation {
	if len(effs) == 0 && sameKey(next, abs) {
		return nil // a stutter
	}
	a := b.Action(abs, l)
	a.Now = now
	outs, err := sc.stepper.Step(abs, a, p)
	if err == nil {
		for _, o := range outs {
			if sameKey(o.State, next) && sameEffects(coremodel.NormalizeEffects(o.Effects), effs) {
				return nil
			}
		}
	}
	if fastCompare.verify {
		fastCompare.keyed.Add(1)
	}
	sc.got = next.AppendKey(sc.got[:0], false)
	got := sc.got
	if len(effs) == 0 {
		if absKey == nil {
			absKey = abs.AppendKey(nil, false)
		}
		if bytes.Equal(got, absKey) {
			return nil
		}
	}
	if err != nil {
		return &mc.Violation{Kind: "refinement", Name: l.Kind.String(), Detail: "the spec has no such step: " + err.Error()}
	}
	sc.fx = abstract.AppendEffectsKey(sc.fx[:0], effs)
	gotFx := sc.fx
	for _, o := range outs {
		sc.out = o.State.AppendKey(sc.out[:0], false)
		if !bytes.Equal(sc.out, got) {
			continue
		}
		sc.ofx = abstract.AppendEffectsKey(sc.ofx[:0], coremodel.NormalizeEffects(o.Effects))
		if bytes.Equal(sc.ofx, gotFx) {
			return nil
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "core did %s\n", DescribeEffects(next, effs))
	fmt.Fprintf(&sb, "      core reached: %s\n", Describe(next))
	if len(outs) == 0 {
		sb.WriteString("      the spec allows no step here")
	}
	for k, o := range outs {
		if k == 4 {
			fmt.Fprintf(&sb, "      (%d more spec outcomes)\n", len(outs)-k)
			break
		}
		fmt.Fprintf(&sb, "      spec allows:  %s\n", DescribeEffects(o.State, coremodel.NormalizeEffects(o.Effects)))
		fmt.Fprintf(&sb, "                    reaching %s\n", Describe(o.State))
	}
	return &mc.Violation{Kind: "refinement", Name: l.Kind.String(), Detail: strings.TrimRight(sb.String(), "\n")}
}

// fastCompare counts, for tests, what refines decided by the field-by-field
// comparison, how often it fell back to the keys, and any field-by-field "equal" that
// the keys contradict (never, or abstract.SameKey is wrong). With verify
// set, every "equal" is checked against the keys.
var fastCompare struct {
	verify                         bool
	equal, unequal, refuted, keyed atomic.Int64
}

// sameKey is abstract.SameKey, checked against the keys under fastCompare.verify.
func sameKey(x, y *abstract.State) bool {
	eq := abstract.SameKey(x, y)
	if fastCompare.verify {
		if !eq {
			fastCompare.unequal.Add(1)
		} else if fastCompare.equal.Add(1); !bytes.Equal(x.AppendKey(nil, false), y.AppendKey(nil, false)) {
			fastCompare.refuted.Add(1)
		}
	}
	return eq
}

// sameEffects is abstract.SameEffects, checked against the keys under
// fastCompare.verify.
func sameEffects(x, y []abstract.Effect) bool {
	eq := abstract.SameEffects(x, y)
	if fastCompare.verify && eq &&
		!bytes.Equal(abstract.AppendEffectsKey(nil, x), abstract.AppendEffectsKey(nil, y)) {
		fastCompare.refuted.Add(1)
	}
	return eq
}
