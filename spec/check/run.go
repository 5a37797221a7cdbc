package check

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/env"
	"github.com/sluice-dev/sluice/spec/mc"
)

// Options tune RunBound.
type Options struct {
	Workers   int           // checker goroutines (0: GOMAXPROCS)
	MaxStates int           // stop beyond this many states (0: none)
	MaxTime   time.Duration // stop each run after this long (0: none)
	SpecOnly  bool          // explore only the spec transcription
	CoreOnly  bool          // explore only the core
	Mutants   core.Mutants
	Progress  io.Writer // per-level progress lines
	// NoSymmetry turns symmetry reduction off (to cross-check it).
	NoSymmetry bool
	// RefinementOnly checks the core against the spec by refinement alone.
	RefinementOnly bool
	// PerTransitionInvariants checks core's invariants and the spec's on
	// the core's abstracted states on every transition, as the checker once
	// did, instead of once per distinct state (CoreSystem.PerStateInvariants).
	PerTransitionInvariants bool
	// ReplayOnly rebuilds every core state by replaying its path, never by
	// copying one (the reference for Clone).
	ReplayOnly bool
	// LabelAll turns the transition reductions off (env.Bound.LabelAll).
	LabelAll bool
	// ExactKey keeps what core leaves dead in the core's keys
	// (CoreSystem.ExactKey).
	ExactKey bool

	_ struct{}
}

// Report is the outcome of one bound.
type Report struct {
	Bound      *env.Bound
	Spec, Core *mc.Result
	// Trace is the readable counterexample of the first violation, if any.
	Trace string
}

// OK reports whether every run completed without a violation.
func (r *Report) OK() bool {
	for _, x := range []*mc.Result{r.Spec, r.Core} {
		if x != nil && x.Verdict() != "ok" {
			return false
		}
	}
	return true
}

// RunBound model-checks the spec and the core inside bound b and writes the
// figures (and a counterexample) to w.
func RunBound(b *env.Bound, w io.Writer, o Options) (*Report, error) {
	bb := *b
	if o.NoSymmetry {
		bb.Symmetry = false
	}
	if o.LabelAll {
		bb.LabelAll = true
	}
	b = &bb
	rep := &Report{Bound: b}
	fmt.Fprintf(w, "== bound %s: %s\n", b.Name, Summary(b))
	mo := mc.Options{Workers: o.Workers, MaxStates: o.MaxStates, Liveness: b.Liveness, Progress: o.Progress}
	deadline := func() time.Time {
		if o.MaxTime > 0 {
			return time.Now().Add(o.MaxTime)
		}
		return time.Time{}
	}
	if !o.CoreOnly && !b.MergeBuild {
		sys, err := NewSpecSystem(b)
		if err != nil {
			return nil, err
		}
		mo.Deadline = deadline()
		res, err := mc.Run(sys, mo)
		if err != nil {
			return nil, err
		}
		rep.Spec = res
		fmt.Fprintln(w, Figures("spec", res))
		if res.Violation != nil {
			rep.Trace = SpecCounterexample(b, res)
			fmt.Fprint(w, rep.Trace)
		}
	}
	if !o.SpecOnly {
		sys, err := NewCoreSystem(b, o.Mutants)
		if err != nil {
			return nil, err
		}
		sys.RefinementOnly = o.RefinementOnly
		sys.PerStateInvariants = !o.PerTransitionInvariants
		sys.ReplayOnly = o.ReplayOnly
		sys.ExactKey = o.ExactKey
		if rep.Spec != nil && rep.Spec.Complete && o.Mutants == 0 {
			sys.SpecReached = rep.Spec.Has
		}
		mo.Deadline = deadline()
		res, err := mc.Run(sys.System(), mo)
		if err != nil {
			return nil, err
		}
		if res.Violation != nil && sys.PerStateInvariants {
			// Checked once per state, a state's invariants are checked when
			// it is expanded, a level after the transition that reached
			// it: the violation found may be a longer counterexample, or
			// name another check, than checking every transition finds
			// first. Run again that way (it stops at its first violation,
			// no deeper than this one) for the shortest counterexample,
			// named as always.
			fmt.Fprintln(w, Figures("core", res))
			fmt.Fprintln(w, "core: a violation: checking every transition for the shortest counterexample")
			sys.PerStateInvariants = false
			mo.Deadline = deadline()
			if res, err = mc.Run(sys.System(), mo); err != nil {
				return nil, err
			}
		}
		rep.Core = res
		fmt.Fprintln(w, Figures("core", res))
		if res.Violation != nil {
			t := Counterexample(b, o.Mutants, res)
			if rep.Trace == "" {
				rep.Trace = t
			}
			fmt.Fprint(w, t)
		}
	}
	return rep, nil
}

// Figures prints one result as the line every run ends with.
func Figures(what string, r *mc.Result) string {
	rate := float64(r.States) / max(r.Elapsed.Seconds(), 1e-9)
	s := fmt.Sprintf("%-4s distinct-states=%d transitions=%d depth=%d states/s=%.0f invariants-checked=%d",
		what, r.States, r.Transitions, r.Depth, rate, r.Checks)
	if r.Refinements > 0 {
		s += fmt.Sprintf(" refinement-steps=%d", r.Refinements)
	}
	s += fmt.Sprintf(" fair-terminal=%d cycles=%d fp-collision-p=%.1e time=%.1fs verdict=%s",
		r.Terminal, r.Cycles, r.CollisionProbability(), r.Elapsed.Seconds(), r.Verdict())
	if r.Violation != nil {
		s += fmt.Sprintf(" (%s %s, %d steps)", r.Violation.Kind, r.Violation.Name, len(r.Path))
	} else if !r.Complete {
		s += fmt.Sprintf(" (every behaviour of up to %d steps explored)", r.CompleteDepth+1)
	}
	return s
}

// Summary prints a bound's dimensions.
func Summary(b *env.Bound) string {
	var parts []string
	slots := []string{}
	for i := 0; i < b.Registered; i++ {
		slots = append(slots, fmt.Sprint(b.Configs[b.InitConfig(i)].Slots))
	}
	parts = append(parts, fmt.Sprintf("models=%d (slots %s)", len(b.Models), strings.Join(slots, ",")))
	req := fmt.Sprintf("requests=%d", b.Requests)
	if len(b.RequestModels) > 0 {
		var to []string
		for _, k := range b.RequestModels {
			to = append(to, b.Models[k])
		}
		req += " to " + strings.Join(to, ",")
	}
	if b.MaxLiveRequests > 0 {
		req += fmt.Sprintf(" (at most %d in flight)", b.MaxLiveRequests)
	}
	parts = append(parts, req)
	parts = append(parts, fmt.Sprintf("managers=apply:%d load:%d unload:%d unregister:%d any:%d bulk:%d", b.Applies,
		b.Loads, b.Unloads, b.Unregisters, b.AnyManagers, b.Bulks))
	parts = append(parts, fmt.Sprintf("cancels=%d failures=%d ticks=%d shutdown=%v", b.Cancels, b.Failures, b.Ticks,
		b.Shutdown))
	o := b.MachineOptions()
	parts = append(parts, fmt.Sprintf("max-loaded=%d memory-budget=%d serialize-cold-loads=%v", o.MaxLoadedModels,
		o.MemoryBudgetMB, o.SerializeColdLoads))
	parts = append(parts, fmt.Sprintf("symmetry=%v", b.Symmetry))
	return strings.Join(parts, " ")
}
