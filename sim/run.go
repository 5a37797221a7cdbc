package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// Result is what one run found.
type Result struct {
	Summary  Summary
	Failure  *Failure  // nil when every check held
	Timeline *Timeline // with Options.Timeline
	// Core is the machine options the seed chose; a trace validator needs
	// them beside the trace (see WriteTraceOptions).
	Core core.Options
}

// Run plays one seeded run to its end or its first failure.
func Run(opts Options) (Result, error) {
	w, err := newWorld(&opts)
	if err != nil {
		return Result{}, fmt.Errorf("sim: seed %d: %w", opts.Seed, err)
	}
	w.run()
	res := Result{Summary: w.summary(), Failure: w.fail, Core: w.sc.opts}
	if w.tl != nil {
		title := fmt.Sprintf("sluice sim, seed %d: %d core events in %s of virtual time", opts.Seed, w.steps, dur(w.now))
		sub := w.sc.describe()
		if w.fail != nil {
			sub = "FAILED " + w.fail.Check + ": " + sub
		}
		res.Timeline = w.tl.finish(w, title, sub)
	}
	if w.trace != nil {
		if err := w.trace.flush(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// MaxRecorded bounds the core events Investigate keeps for minimization;
// a failure later than that is reported with its trace, unminimized.
const MaxRecorded = 1_000_000

// Investigation is a failing seed played again with everything recorded.
type Investigation struct {
	Failure  *Failure
	Core     core.Options // the machine options of the run
	Recorded int          // core events up to the failure
	// Minimized is the shortest failing event list the minimizer found,
	// readable, each event followed by its effects ("-> ..."); nil when
	// the failure could not be minimized.
	Minimized []string
	Kept      int  // events in Minimized
	Replays   int  // candidate replays the minimizer ran
	Complete  bool // the minimizer finished within its budget
	Note      string
}

// Investigate re-runs a failing seed (it replays exactly) with the trace
// written to trace (if not nil) and the core events recorded, checks that
// it fails the same way at the same event, then minimizes the events by
// delta debugging: every candidate is replayed through the core under the
// same checks and must fail with the same check. The minimized events are
// written to minTrace as ndjson (if not nil).
func Investigate(opts Options, f *Failure, trace, minTrace io.Writer, budget time.Duration) (*Investigation, error) {
	o := opts
	o.Trace, o.Timeline = trace, false
	o.record = f.Step <= MaxRecorded
	o.stopAt = f.Step
	w, err := newWorld(&o)
	if err != nil {
		return nil, fmt.Errorf("sim: seed %d: %w", opts.Seed, err)
	}
	w.run()
	if w.trace != nil {
		if err := w.trace.flush(); err != nil {
			return nil, err
		}
	}
	if w.fail == nil || w.fail.Check != f.Check || w.fail.Step != f.Step {
		return nil, fmt.Errorf("sim: seed %d did not replay its failure %s at event %d (got %v)", opts.Seed, f.Check, f.Step, w.fail)
	}
	inv := &Investigation{Failure: w.fail, Recorded: w.steps, Core: w.sc.opts}
	if !o.record {
		inv.Note = fmt.Sprintf("not minimized: the failure comes after %d events", MaxRecorded)
		return inv, nil
	}
	rec := w.rec
	copts := w.sc.opts
	want, at := f.Check, f.Time
	all := make([]int, len(rec))
	for k := range all {
		all[k] = k
	}
	if g := replaySubset(copts, o.NoInvariants, rec, all, want, at); g == nil || g.Check != want {
		inv.Note = "not minimized: the failure needs the simulator's clock, not only core events"
		return inv, nil
	}
	fails := func(idx []int) bool {
		g := replaySubset(copts, o.NoInvariants, rec, idx, want, at)
		return g != nil && g.Check == want
	}
	idx, tests, complete := ddmin(all, fails, 20000, time.Now().Add(budget))
	inv.Replays, inv.Complete = tests, complete
	r, err := newReplayer(copts, true, minTrace)
	if err != nil {
		return nil, err
	}
	r.noInv = o.NoInvariants
	for _, k := range idx {
		if !r.step(&rec[k]) {
			break
		}
	}
	r.finish(want, at)
	if r.trace != nil {
		if err := r.trace.flush(); err != nil {
			return nil, err
		}
	}
	for k, st := range r.steps {
		line := fmt.Sprintf("%3d %s", k+1, describeEvent(&st.ev, st.tk))
		if st.err != nil {
			line += fmt.Sprintf("  (refused: %v)", st.err)
		}
		inv.Minimized = append(inv.Minimized, line)
		for _, e := range st.effs {
			inv.Minimized = append(inv.Minimized, "      -> "+e)
		}
	}
	if r.fail != nil {
		inv.Minimized = append(inv.Minimized, "      !! "+r.fail.Check+": "+r.fail.Detail)
		for _, c := range r.fail.Chain {
			inv.Minimized = append(inv.Minimized, "         "+c)
		}
	}
	inv.Kept = len(r.steps)
	return inv, nil
}

// WriteTraceOptions writes the machine options of a trace beside it, as
// <trace without .ndjson>.options.json (core.Options as JSON): spec's trace
// validator reads them from there.
func WriteTraceOptions(tracePath string, o core.Options) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("sim: trace options: %w", err)
	}
	p := strings.TrimSuffix(tracePath, ".ndjson") + ".options.json"
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("sim: trace options: %w", err)
	}
	return nil
}
