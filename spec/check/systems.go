// Package check puts the pieces together: the bounds of `make model-check`
// and `make model-check-large`, the spec transcription and the real core as
// systems for the model checker (package mc), the refinement check between
// them, readable counterexamples and the printed report.
//
// Threading rule: Systems are safe for the checker's concurrent Expand
// calls: they share only read-only bounds and build their states per call.
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
	return &SpecSystem{B: b, P: b.Params(), setups: setups}, nil
}

func (sy *SpecSystem) key(st specState) uint64 {
	k := st.s.AppendKey(nil, sy.B.Symmetry)
	return mc.Fingerprint(st.u.AppendKey(k))
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
			exp.Checks += int64(len(abstract.Invariants))
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

// CoreSystem explores the real core.Machine and checks that it refines the
// spec.
type CoreSystem struct {
	B       *env.Bound
	P       *abstract.Params
	Mutants core.Mutants
	// NoRefinement skips the refinement check (for timing comparisons).
	NoRefinement bool
	// RefinementOnly skips every check but refinement (to show what
	// refinement alone catches).
	RefinementOnly bool
	// ReplayOnly copies states by replaying their path only, never by
	// coremodel's reflective clone.
	ReplayOnly bool
	// SpecReached, when set, reports whether the spec's own exploration of
	// the same bound reached a state (by its fingerprint): every abstracted
	// core state must be one of them, or the spec run missed behaviour.
	SpecReached func(fp uint64) bool
	setups      [][]env.Label
}

// NewCoreSystem returns core (with the given mutants) inside bound b.
func NewCoreSystem(b *env.Bound, mutants core.Mutants) (*CoreSystem, error) {
	setups, err := b.Setups()
	if err != nil {
		return nil, err
	}
	return &CoreSystem{B: b, P: b.Params(), Mutants: mutants, setups: setups}, nil
}

// Roots implements mc.System.
func (sy *CoreSystem) Roots() ([]mc.Root, error) {
	var roots []mc.Root
	for _, setup := range sy.setups {
		d, err := coremodel.Replay(sy.B, sy.Mutants, setup, nil)
		if err != nil {
			return nil, err
		}
		roots = append(roots, mc.Root{FP: mc.Fingerprint(d.AppendKey(nil, d.Views(), sy.B.Symmetry))})
	}
	return roots, nil
}

// Expand implements mc.System: it rebuilds the state by replaying its path,
// then applies every enabled label to a copy of it (a clone, or another
// replay with ReplayOnly), checking core's invariants, the ticket rules,
// the spec's invariants on the abstracted state, and refinement.
func (sy *CoreSystem) Expand(root int, path []env.Label, _ any) (mc.Expansion, error) {
	var exp mc.Expansion
	d, err := coremodel.Replay(sy.B, sy.Mutants, sy.setups[root], path)
	if err != nil {
		return exp, err
	}
	vs := d.Views()
	abs := d.Abstract(vs)
	self := mc.Fingerprint(d.AppendKey(nil, vs, sy.B.Symmetry))
	exp.Waiting = abs.Waiting()
	exp.ShutdownPending = abs.Shutdown && !abs.ShutdownSent
	labels := sy.B.Enabled(abs, d.Budget, nil)
	for k, l := range labels {
		exp.Fair = exp.Fair || l.Fair
		dd := d
		if k < len(labels)-1 {
			if sy.ReplayOnly {
				if dd, err = coremodel.Replay(sy.B, sy.Mutants, sy.setups[root], path); err != nil {
					return exp, err
				}
			} else {
				dd = d.Clone()
			}
		}
		succ, checks, refs, err := sy.step(dd, abs, l)
		if err != nil {
			return exp, err
		}
		exp.Checks += checks
		exp.Refinements += refs
		succ.Stutter = succ.Err == nil && succ.FP == self
		exp.Succs = append(exp.Succs, succ)
	}
	return exp, nil
}

// step applies l to d (whose abstraction is abs) and checks the transition:
// each core event it stands for (one, or a merged build's several) is
// checked on its own.
func (sy *CoreSystem) step(d *coremodel.Driver, abs *abstract.State, l env.Label) (mc.Succ, int64, int64, error) {
	succ := mc.Succ{Label: l}
	var checks, refs int64
	var vs []core.ModelView
	for k, x := range d.Micro(l) {
		res, err := d.ApplyMicro(x, k == 0)
		if err != nil {
			return succ, checks, refs, err
		}
		if k == 0 {
			succ.Label.Ticket = res.Label.Ticket
		}
		vs = d.Views()
		checks += int64(len(core.Invariants) + len(abstract.Invariants))
		next, v := sy.check(d, abs, res, vs, &refs)
		if v != nil {
			succ.Err = v
			break
		}
		abs = next
	}
	succ.FP = mc.Fingerprint(d.AppendKey(nil, vs, sy.B.Symmetry))
	if succ.Err == nil && sy.SpecReached != nil {
		abs := d.Abstract(vs)
		if fp := mc.Fingerprint(d.Budget.AppendKey(abs.AppendKey(nil, sy.B.Symmetry))); !sy.SpecReached(fp) {
			succ.Err = &mc.Violation{Kind: "coverage", Name: "SpecReachesCore",
				Detail: "the spec's exploration never reached the abstracted core state " + Describe(abs)}
		}
	}
	return succ, checks, refs, nil
}

// check checks one core event: the ticket rules, core's invariants, the
// spec's invariants on the abstracted state, and refinement.
func (sy *CoreSystem) check(d *coremodel.Driver, abs *abstract.State, res coremodel.Result, vs []core.ModelView,
	refs *int64) (*abstract.State, *mc.Violation) {
	next := d.Abstract(vs)
	if !sy.RefinementOnly {
		if res.Discipline != nil {
			return next, &mc.Violation{Kind: "ticket", Name: "OneAnswerPerTicket", Detail: res.Discipline.Error()}
		}
		if res.Invariants != nil {
			return next, invariantViolation("invariant", res.Invariants)
		}
		if err := abstract.CheckInvariants(next, sy.P); err != nil {
			return next, invariantViolation("spec-invariant", err)
		}
	}
	if sy.NoRefinement {
		return next, nil
	}
	*refs++
	return next, Refines(sy.B, sy.P, abs, res.Label, d.Last.Now, next, d.AbstractEffects())
}

// Refines checks one core step against the spec: the abstracted successor
// next, with the effects the core emitted, must be an outcome of the spec
// action of l from abs, or (with no effects) abs itself: a stutter.
func Refines(b *env.Bound, p *abstract.Params, abs *abstract.State, l env.Label, now int64, next *abstract.State,
	effs []abstract.Effect) *mc.Violation {
	got := next.AppendKey(nil, false)
	gotFx := abstract.AppendEffectsKey(nil, effs)
	if len(effs) == 0 && bytes.Equal(got, abs.AppendKey(nil, false)) {
		return nil
	}
	a := b.Action(abs, l)
	a.Now = now
	outs, err := abstract.Step(abs, a, p)
	if err != nil {
		return &mc.Violation{Kind: "refinement", Name: l.Kind.String(), Detail: "the spec has no such step: " + err.Error()}
	}
	for _, o := range outs {
		if bytes.Equal(o.State.AppendKey(nil, false), got) &&
			bytes.Equal(abstract.AppendEffectsKey(nil, coremodel.NormalizeEffects(o.Effects)), gotFx) {
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
