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
func refines(sc *scratch, b *env.Bound, p *abstract.Params, abs *abstract.State, absKey []byte, l env.Label,
	now int64, next *abstract.State, effs []abstract.Effect) *mc.Violation {
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
	sc.fx = abstract.AppendEffectsKey(sc.fx[:0], effs)
	gotFx := sc.fx
	a := b.Action(abs, l)
	a.Now = now
	outs, err := sc.stepper.Step(abs, a, p)
	if err != nil {
		return &mc.Violation{Kind: "refinement", Name: l.Kind.String(), Detail: "the spec has no such step: " + err.Error()}
	}
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
