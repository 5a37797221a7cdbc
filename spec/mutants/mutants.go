// Package mutants runs the formal checks against core's planted bugs
// (core.AllMutants): for each mutant, whether the model checker finds it
// at the make-test bounds (which check, after how many steps), and how many
// random traces of the mutated core the trace validator rejects. A check
// that catches no mutant is not a check.
//
// Threading rule: Run is sequential; each model-checker run uses the
// checker's own workers.
package mutants

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/check"
	"github.com/sluice-dev/sluice/spec/trace"
)

// Options tune Run.
type Options struct {
	Bounds     []string // model-checker bounds tried in order (default small, small3)
	Traces     int      // random traces per mutant (default 50)
	TraceSteps int      // events per random trace (default 150)
	Workers    int
	JSON       bool // one JSON object per line instead of text

	_ struct{}
}

// Result is the verdict on one mutant.
type Result struct {
	Mutant     string `json:"mutant"`
	ModelCheck bool   `json:"modelcheck"`       // the model checker found a violation
	Bound      string `json:"bound,omitempty"`  // where
	Check      string `json:"check,omitempty"`  // kind:name of the violation
	Length     int    `json:"length,omitempty"` // steps of the counterexample (after setup)
	States     int64  `json:"states"`           // states explored until then
	// Refinement: refinement alone (core's and the spec's invariants and the
	// ticket rules off) finds it too, after RefinementLength steps.
	Refinement       bool   `json:"refinement"`
	RefinementLength int    `json:"refinement_length,omitempty"`
	TraceCheck       bool   `json:"tracecheck"` // some random trace was rejected
	Rejected         int    `json:"rejected"`   // rejected traces
	Traces           int    `json:"traces"`     // traces generated
	FirstReject      string `json:"first_reject,omitempty"`
}

// Run checks every mutant and writes one line per mutant and a summary.
func Run(w io.Writer, o Options) ([]Result, error) {
	if len(o.Bounds) == 0 {
		o.Bounds = []string{"small", "small3"}
	}
	if o.Traces == 0 {
		o.Traces = 50
	}
	if o.TraceSteps == 0 {
		o.TraceSteps = 150
	}
	var out []Result
	mcCaught, tvCaught := 0, 0
	for _, mu := range core.AllMutants() {
		r := Result{Mutant: mu.String(), Traces: o.Traces}
		for _, name := range o.Bounds {
			b, err := check.Bound(name)
			if err != nil {
				return nil, err
			}
			rep, err := check.RunBound(b, io.Discard, check.Options{CoreOnly: true, Mutants: mu, Workers: o.Workers})
			if err != nil {
				return nil, fmt.Errorf("mutants: %s at %s: %w", mu, name, err)
			}
			r.States += rep.Core.States
			if v := rep.Core.Violation; v != nil {
				r.ModelCheck, r.Bound = true, name
				r.Check = v.Kind + ":" + v.Name
				r.Length = len(rep.Core.Path)
				break
			}
		}
		for _, name := range o.Bounds {
			b, err := check.Bound(name)
			if err != nil {
				return nil, err
			}
			rep, err := check.RunBound(b, io.Discard, check.Options{CoreOnly: true, Mutants: mu, Workers: o.Workers,
				RefinementOnly: true})
			if err != nil {
				return nil, fmt.Errorf("mutants: %s at %s: %w", mu, name, err)
			}
			if v := rep.Core.Violation; v != nil {
				r.Refinement, r.RefinementLength = true, len(rep.Core.Path)
				break
			}
		}
		for seed := 1; seed <= o.Traces; seed++ {
			var buf bytes.Buffer
			opts, err := trace.Generate(&buf, trace.GenOptions{Seed: uint64(seed), Steps: o.TraceSteps, Mutants: mu})
			if err != nil {
				return nil, fmt.Errorf("mutants: %s trace %d: %w", mu, seed, err)
			}
			if _, err := trace.Validate(&buf, &opts); err != nil {
				r.Rejected++
				if r.FirstReject == "" {
					r.FirstReject = fmt.Sprintf("seed %d: %v", seed, err)
				}
			}
		}
		r.TraceCheck = r.Rejected > 0
		if r.ModelCheck {
			mcCaught++
		}
		if r.TraceCheck {
			tvCaught++
		}
		out = append(out, r)
		if o.JSON {
			b, err := json.Marshal(r)
			if err != nil {
				return nil, fmt.Errorf("mutants: %w", err)
			}
			fmt.Fprintf(w, "%s\n", b)
			continue
		}
		mc := "missed"
		if r.ModelCheck {
			mc = fmt.Sprintf("caught bound=%s check=%s length=%d", r.Bound, r.Check, r.Length)
		}
		tv := "missed"
		if r.TraceCheck {
			tv = "caught"
		}
		ref := "missed"
		if r.Refinement {
			ref = fmt.Sprintf("caught length=%d", r.RefinementLength)
		}
		fmt.Fprintf(w, "mutant=%s\tmodelcheck=%s states=%d\trefinement-alone=%s\ttracecheck=%s rejected=%d/%d\n",
			r.Mutant, mc, r.States, ref, tv, r.Rejected, r.Traces)
	}
	if !o.JSON {
		fmt.Fprintf(w, "mutants: %d, caught by the model checker: %d, by trace validation: %d\n",
			len(out), mcCaught, tvCaught)
	}
	return out, nil
}
