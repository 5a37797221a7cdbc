package check

import (
	"sync"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/coremodel"
	"github.com/sluice-dev/sluice/spec/env"
	"github.com/sluice-dev/sluice/spec/mc"
)

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
	// PerStateInvariants checks core's invariants and the spec's state
	// invariants once per distinct state, when it is expanded, instead of
	// on every transition into it; EvictOnlyIdle (core's and the spec's),
	// which reads the last step, stays per transition, as do the states
	// inside a merged build (never expanded).
	PerStateInvariants bool
	// ReplayOnly rebuilds every state and every copy of one by replaying
	// its path (see System), never by cloning.
	ReplayOnly bool
	// ExactKey keeps in the canonical keys what core leaves dead (see
	// coremodel.Driver.AppendKey), to cross-check that forgetting it loses
	// no behaviour.
	ExactKey bool
	// SpecReached, when set, reports whether the spec's own exploration of
	// the same bound reached a state (by its fingerprint): every abstracted
	// core state must be one of them, or the spec run missed behaviour.
	SpecReached func(fp uint64) bool
	setups      [][]env.Label
	class       func(id string) byte // symmetry classes (nil: no symmetry)
	free        sync.Pool            // *coremodel.Driver the checker recycled
}

// NewCoreSystem returns core (with the given mutants) inside bound b.
func NewCoreSystem(b *env.Bound, mutants core.Mutants) (*CoreSystem, error) {
	setups, err := b.Setups()
	if err != nil {
		return nil, err
	}
	return &CoreSystem{B: b, P: b.Params(), Mutants: mutants, setups: setups, class: classOf(b)}, nil
}

// Roots implements mc.System.
func (sy *CoreSystem) Roots() ([]mc.Root, error) {
	var roots []mc.Root
	for k := range sy.setups {
		d, err := sy.replay(k, nil)
		if err != nil {
			return nil, err
		}
		roots = append(roots, mc.Root{FP: mc.Fingerprint(d.AppendKey(nil, d.Views(), sy.class))})
	}
	return roots, nil
}

// Expand implements mc.System: it rebuilds the state by replaying its path,
// then expands it (ExpandState).
func (sy *CoreSystem) Expand(root int, path []env.Label, _ any) (mc.Expansion, error) {
	d, err := sy.replay(root, path)
	if err != nil {
		return mc.Expansion{}, err
	}
	return sy.ExpandState(d)
}

// replay returns the driver in the state that path reaches from initial
// state root.
func (sy *CoreSystem) replay(root int, path []env.Label) (*coremodel.Driver, error) {
	d, err := coremodel.Replay(sy.B, sy.Mutants, sy.setups[root], path)
	if err != nil {
		return nil, err
	}
	d.ExactKey = sy.ExactKey
	return d, nil
}

// Root implements mc.Deriver: initial state k, replayed from its setup.
func (sy *CoreSystem) Root(k int) (any, error) { return sy.replay(k, nil) }

// Derive implements mc.Deriver: a copy of parent after l, in the memory of
// a recycled state when there is one.
func (sy *CoreSystem) Derive(parent any, l env.Label) (any, error) {
	d, _ := sy.free.Get().(*coremodel.Driver)
	if d == nil {
		d = new(coremodel.Driver)
	}
	parent.(*coremodel.Driver).CloneInto(d)
	if err := d.Redo(l); err != nil {
		return nil, err
	}
	return d, nil
}

// Recycle implements mc.Recycler: st is no longer the checker's.
func (sy *CoreSystem) Recycle(st any) { sy.free.Put(st) }

// ExpandState implements mc.Deriver: it applies every enabled label to a
// clone of the state, checking core's invariants, the ticket rules, the
// spec's invariants on the abstracted state, and refinement. The last label
// is applied to st itself.
//
// With symmetry, a model in the same situation as an earlier one of its
// class (an identical key) gets no labels of its own: each of them leads to
// the image, under exchanging the two models, of what the same label on the
// earlier model leads to, which has the same canonical key and the same
// checks up to renaming. Fair still says whether any label is weakly fair.
func (sy *CoreSystem) ExpandState(st any) (mc.Expansion, error) {
	var exp mc.Expansion
	d := st.(*coremodel.Driver)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	sc.pviews = d.ViewsInto(sc.pviews)
	vs := sc.pviews
	abs := d.AbstractIn(&sc.parent, vs)
	sc.abs = abs.AppendKey(sc.abs[:0], false)
	absKey := sc.abs
	sc.twins = append(sc.twins[:0], make([]bool, len(vs))...)
	twins := sc.twins
	sc.key = d.Key(sc.key[:0], vs, sy.class, twins)
	self := mc.Fingerprint(sc.key)
	exp.Waiting = abs.Waiting()
	exp.ShutdownPending = abs.Shutdown && !abs.ShutdownSent
	sy.stateChecks(d, abs, &exp)
	sc.labels = sy.B.Enabled(abs, d.Budget, sc.labels[:0])
	all := sc.labels
	labels := all[:0]
	for _, l := range all {
		exp.Fair = exp.Fair || l.Fair
		if mi, ok := sy.B.ModelOf(abs, l); ok && !sy.B.LabelAll {
			if h, ok := d.M.Lookup(sy.B.Models[mi]); ok && twins[h] {
				continue
			}
		}
		labels = append(labels, l)
	}
	exp.Succs = make([]mc.Succ, 0, len(labels))
	for k, l := range labels {
		exp.Fair = exp.Fair || l.Fair
		dd := d
		if k < len(labels)-1 { // a copy in the scratch's memory: only its fingerprint outlives the step
			if sc.spare == nil {
				sc.spare = new(coremodel.Driver)
			}
			d.CloneInto(sc.spare)
			dd = sc.spare
		}
		succ, checks, refs, err := sy.step(sc, dd, abs, absKey, l)
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

// stateChecks checks core's invariants and the spec's state invariants
// once per distinct state (PerStateInvariants), when it is expanded: the
// state was reached by a checked transition (or is a root), and only the
// last-step invariant (EvictOnlyIdle), checked on each transition, depends
// on which one.
func (sy *CoreSystem) stateChecks(d *coremodel.Driver, abs *abstract.State, exp *mc.Expansion) {
	if !sy.PerStateInvariants || sy.RefinementOnly {
		return
	}
	exp.Checks += int64(coremodel.NumStateInvariants + abstract.NumInvariants - 1)
	if err := d.CheckStateInvariants(); err != nil {
		exp.Err = invariantViolation("invariant", err)
	} else if err := abstract.CheckStateInvariants(abs, sy.P); err != nil {
		exp.Err = invariantViolation("spec-invariant", err)
	}
}

// scratch is the memory of one expansion, reused: key buffers, the
// abstracted states of successors (two, alternating along a merged build's
// core events), and the spec's stepper for refinement.
type scratch struct {
	abs, key, got, out, fx, ofx []byte
	next                        [2]coremodel.AbsBuf
	parent                      coremodel.AbsBuf  // the expanded state's abstraction
	pviews, views               []core.ModelView  // the expanded state's views, a successor's
	spare                       *coremodel.Driver // the copy each label but the last is applied to
	twins                       []bool
	labels, micro               []env.Label
	effs                        []abstract.Effect
	stepper                     abstract.Stepper
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// replayOnly hides CoreSystem's Deriver methods: the checker then rebuilds
// every state by replaying its path from the initial state (Expand), and
// never copies one.
type replayOnly struct{ sys *CoreSystem }

func (r replayOnly) Roots() ([]mc.Root, error) { return r.sys.Roots() }

func (r replayOnly) Expand(root int, path []env.Label, _ any) (mc.Expansion, error) {
	var exp mc.Expansion
	sy := r.sys
	d, err := sy.replay(root, path)
	if err != nil {
		return exp, err
	}
	vs := d.Views()
	abs := d.Abstract(vs)
	absKey := abs.AppendKey(nil, false)
	self := mc.Fingerprint(d.AppendKey(nil, vs, sy.class))
	exp.Waiting = abs.Waiting()
	exp.ShutdownPending = abs.Shutdown && !abs.ShutdownSent
	sy.stateChecks(d, abs, &exp)
	for _, l := range sy.B.Enabled(abs, d.Budget, nil) {
		exp.Fair = exp.Fair || l.Fair
		dd, err := sy.replay(root, path)
		if err != nil {
			return exp, err
		}
		succ, checks, refs, err := sy.step(new(scratch), dd, abs, absKey, l)
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

// System returns what the checker explores: sy itself, or with ReplayOnly a
// view of it that only replays.
func (sy *CoreSystem) System() mc.System {
	if sy.ReplayOnly {
		return replayOnly{sy}
	}
	return sy
}

// step applies l to d (whose abstraction is abs) and checks the transition:
// each core event it stands for (one, or a merged build's several) is
// checked on its own.
func (sy *CoreSystem) step(sc *scratch, d *coremodel.Driver, abs *abstract.State, absKey []byte,
	l env.Label) (mc.Succ, int64, int64, error) {
	succ := mc.Succ{Label: l}
	var checks, refs int64
	var vs []core.ModelView
	sc.micro = d.MicroInto(sc.micro[:0], l)
	for k, x := range sc.micro {
		// The last event's state is expanded later, where its state
		// invariants are checked once (PerStateInvariants); the states
		// inside a merged build are never expanded, so they are checked here.
		stateInv := !sy.PerStateInvariants || k < len(sc.micro)-1
		mode := coremodel.CheckAll
		if !stateInv {
			mode = coremodel.CheckStep
		}
		res, err := d.ApplyMicroWith(x, k == 0, mode)
		if err != nil {
			return succ, checks, refs, err
		}
		if k == 0 {
			succ.Label.Ticket = res.Label.Ticket
		}
		sc.views = d.ViewsInto(sc.views)
		vs = sc.views
		next := d.AbstractIn(&sc.next[k%2], vs)
		checks += 2 // EvictOnlyIdle, core's and the spec's
		if stateInv {
			checks += int64(core.NumInvariants - 1 + abstract.NumInvariants - 1)
		}
		if v := sy.check(sc, d, abs, absKey, res, next, stateInv, &refs); v != nil {
			succ.Err = v
			break
		}
		abs, absKey = next, nil
	}
	sc.key = d.AppendKey(sc.key[:0], vs, sy.class)
	succ.FP = mc.Fingerprint(sc.key)
	if succ.Err == nil && sy.SpecReached != nil {
		if fp := mc.Fingerprint(specKey(abs, d.Budget, sy.class)); !sy.SpecReached(fp) {
			succ.Err = &mc.Violation{Kind: "coverage", Name: "SpecReachesCore",
				Detail: "the spec's exploration never reached the abstracted core state " + Describe(abs)}
		}
	}
	return succ, checks, refs, nil
}

// check checks one core event: the ticket rules, core's invariants, the
// spec's invariants on the abstracted state, and refinement.
// next is the abstraction of the state after the event.
func (sy *CoreSystem) check(sc *scratch, d *coremodel.Driver, abs *abstract.State, absKey []byte,
	res coremodel.Result, next *abstract.State, stateInv bool, refs *int64) *mc.Violation {
	if !sy.RefinementOnly {
		if res.Discipline != nil {
			return &mc.Violation{Kind: "ticket", Name: "OneAnswerPerTicket", Detail: res.Discipline.Error()}
		}
		if res.Invariants != nil {
			return invariantViolation("invariant", res.Invariants)
		}
		check := abstract.CheckStepInvariants
		if stateInv {
			check = abstract.CheckInvariants
		}
		if err := check(next, sy.P); err != nil {
			return invariantViolation("spec-invariant", err)
		}
	}
	if sy.NoRefinement {
		return nil
	}
	*refs++
	sc.effs = d.AbstractEffectsInto(sc.effs)
	return refines(sc, sy.B, sy.P, abs, absKey, res.Label, d.Last.Now, next, sc.effs)
}
