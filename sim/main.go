package sim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
)

const usage = `usage: sluice sim [flags]

Runs the deterministic simulator: seeded workloads drive the scheduler core
in virtual time with faults at every backend step; core's invariants, the
client-visible properties and a liveness watchdog are checked after every
event. A failure prints its seed, a minimized event list and the path of its
ndjson trace. Exit status: 0 when every check held (with --mutant all: every
mutant caught), 1 on a failure, 2 on bad usage.

Examples:
  sluice sim --seed 7 --steps 100000 --timeline /tmp/t.svg
  sluice sim --seeds 200 --steps 5000          # the short campaign
  sluice sim --seed 12 --models 6 --shutdown always --steps 10000000   # the soak
  sluice sim --mutant all                      # which planted bugs are found
  sluice sim --mutant barge --seed 3           # replay one
  sluice sim --replay out/trace.ndjson         # replay a server's --trace on core, report divergence
  sluice sim --replay out/traces/              # every *.ndjson trace in a folder
  sluice sim --replay out/trace.ndjson --slots 4 --max-loaded-models 3   # what if: waits under another configuration

Flags:
`

// Main is the `sluice sim` command: args are the arguments after "sim".
// It returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	seed := fs.Uint64("seed", 1, "the (first) seed")
	seeds := fs.Int("seeds", 1, "number of seeds, from --seed on (with --mutant all: per mutant, default 300)")
	steps := fs.Int("steps", DefaultSteps, "core events per seed before the workload stops and the run drains")
	models := fs.Int("models", 0, "model IDs per run (0: the seed picks 1..6)")
	mutant := fs.String("mutant", "", "plant a core mutant by name, or \"all\" for the mutant table: "+mutantList())
	timeline := fs.String("timeline", "", "write an SVG timeline of slots and queues per model (the first seed, or the failing one)")
	trace := fs.String("trace", "", "write the ndjson trace here (a campaign writes the first failing seed's)")
	faults := fs.String("faults", "random", "fault rates: random, none, low or high")
	shutdown := fs.String("shutdown", "random", "BeginShutdown near the end: random, always or never")
	stall := fs.Duration("stall", time.Duration(DefaultStallBound), "liveness bound in virtual time")
	workers := fs.Int("workers", 0, "seeds run in parallel (0: GOMAXPROCS)")
	minimize := fs.Duration("minimize", 60*time.Second, "wall-clock budget of the minimizer (0: no minimization)")
	quiet := fs.Bool("quiet", false, "print only the totals and failures")
	noInv := fs.Bool("no-invariants", false, "skip core.CheckInvariants: only the simulator's own oracle and watchdog check")
	replay := fs.String("replay", "", "replay a recorded trace (sluice serve --trace; a folder: each *.ndjson in it) on core under its recorded options and report the first divergence and per-model waits")
	slots := fs.Int("slots", 0, "with --replay: what if every model had this many slots")
	maxLoaded := fs.Int("max-loaded-models", 0, "with --replay: what if at most this many models were resident (0: no limit)")
	memBudget := fs.Int64("memory-budget", 0, "with --replay: what if resident models had this many MB (0: no budget)")
	admission := fs.Duration("admission-timeout", 0, "with --replay: what if every request had this admission timeout (0: none)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice sim: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var w WhatIf
	if flagSet(fs, "slots") {
		if *slots < 1 || *slots > core.MaxSlots {
			fmt.Fprintf(stderr, "sluice sim: --slots must be 1..%d\n", core.MaxSlots)
			return 2
		}
		w.Slots = *slots
	}
	if flagSet(fs, "max-loaded-models") {
		w.MaxLoadedModels = maxLoaded
	}
	if flagSet(fs, "memory-budget") {
		w.MemoryBudgetMB = memBudget
	}
	if flagSet(fs, "admission-timeout") {
		w.AdmissionTimeout = admission
	}
	if w.Changed() && *replay == "" {
		fmt.Fprintln(stderr, "sluice sim: --slots, --max-loaded-models, --memory-budget and --admission-timeout need --replay")
		return 2
	}
	if *replay != "" && w.Changed() {
		return whatIfMain(*replay, w, stdout, stderr)
	}
	if *replay != "" {
		return replayMain(*replay, *quiet, stdout, stderr)
	}
	base := Options{Steps: *steps, Models: *models, StallBound: int64(*stall), NoInvariants: *noInv}
	var err error
	if base.Faults, err = ParseFaults(*faults); err == nil {
		base.Shutdown, err = ParseMode(*shutdown)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice sim:", err)
		return 2
	}
	if *mutant == "all" {
		n := *seeds
		if !flagSet(fs, "seeds") {
			n = 300
		}
		rs, err := Mutants(base, *seed, n, *workers, 0)
		if err != nil {
			fmt.Fprintln(stderr, "sluice sim:", err)
			return 1
		}
		WriteMutants(stdout, *seed, rs)
		for _, r := range rs {
			if !r.Caught {
				return 1
			}
		}
		return 0
	}
	if *mutant != "" {
		mu, ok := core.ParseMutant(*mutant)
		if !ok {
			fmt.Fprintf(stderr, "sluice sim: unknown mutant %q (known: %s)\n", *mutant, mutantList())
			return 2
		}
		base.Mutants = mu
	}
	c := cli{stdout: stdout, stderr: stderr, base: base, timeline: *timeline, trace: *trace, budget: *minimize, quiet: *quiet}
	if *seeds <= 1 {
		return c.single(*seed)
	}
	return c.campaign(*seed, *seeds, *workers)
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func mutantList() string {
	var names []string
	for _, m := range core.AllMutants() {
		names = append(names, m.String())
	}
	return strings.Join(names, ", ")
}

// cli carries the command's settings between its steps.
type cli struct {
	stdout, stderr io.Writer
	base           Options
	timeline       string
	trace          string
	budget         time.Duration
	quiet          bool
}

func (c *cli) single(seed uint64) int {
	o := c.base
	o.Seed = seed
	o.Timeline = c.timeline != ""
	var tf *os.File
	if c.trace != "" {
		f, err := os.Create(c.trace)
		if err != nil {
			fmt.Fprintln(c.stderr, "sluice sim:", err)
			return 1
		}
		tf = f
		o.Trace = f
	}
	start := time.Now()
	res, err := Run(o)
	el := time.Since(start)
	if tf != nil {
		if cerr := tf.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("sim: trace: %w", cerr)
		}
	}
	if err == nil && c.trace != "" {
		err = WriteTraceOptions(c.trace, res.Core)
	}
	if err != nil {
		fmt.Fprintln(c.stderr, "sluice sim:", err)
		return 1
	}
	if !c.quiet {
		res.Summary.Write(c.stdout)
	}
	fmt.Fprintf(c.stdout, "sim: seed %d: %d events in %s wall", seed, res.Summary.Events, el.Round(time.Millisecond))
	if el > 50*time.Millisecond {
		fmt.Fprintf(c.stdout, " (%.0f events/s)", float64(res.Summary.Events)/el.Seconds())
	}
	fmt.Fprintln(c.stdout)
	if res.Timeline != nil {
		if err := writeTimeline(c.timeline, res.Timeline); err != nil {
			fmt.Fprintln(c.stderr, "sluice sim:", err)
			return 1
		}
		fmt.Fprintf(c.stdout, "sim: timeline %s\n", c.timeline)
	}
	if res.Failure == nil {
		if c.trace != "" {
			fmt.Fprintf(c.stdout, "sim: trace %s\n", c.trace)
		}
		fmt.Fprintf(c.stdout, "sim: ok\n")
		return 0
	}
	c.report(o, res.Failure, c.trace != "")
	return 1
}

func (c *cli) campaign(first uint64, n, workers int) int {
	co := CampaignOptions{First: first, Seeds: n, Workers: workers, Base: c.base, StopAtFirst: c.base.Mutants != 0}
	cr, err := Campaign(co)
	if err != nil {
		fmt.Fprintln(c.stderr, "sluice sim:", err)
		return 1
	}
	for _, f := range cr.Failures {
		fmt.Fprintf(c.stdout, "FAIL %v\n", f)
	}
	cr.Write(c.stdout)
	if len(cr.Failures) == 0 {
		if c.timeline != "" {
			o := c.base
			o.Seed, o.Timeline = first, true
			if res, err := Run(o); err == nil {
				if err := writeTimeline(c.timeline, res.Timeline); err != nil {
					fmt.Fprintln(c.stderr, "sluice sim:", err)
					return 1
				}
			}
		}
		fmt.Fprintf(c.stdout, "sim: ok\n")
		return 0
	}
	o := c.base
	o.Seed = cr.Failures[0].Seed
	if c.timeline != "" {
		o.Timeline = true
		if res, err := Run(o); err == nil {
			if err := writeTimeline(c.timeline, res.Timeline); err != nil {
				fmt.Fprintln(c.stderr, "sluice sim:", err)
			}
		}
		o.Timeline = false
	}
	c.report(o, cr.Failures[0], false)
	return 1
}

// report prints a failure: its seed and check, the stall chain, the
// command that replays it, the trace's path and the minimized events.
func (c *cli) report(o Options, f *Failure, traced bool) {
	w := c.stdout
	fmt.Fprintf(w, "FAIL %v\n", f)
	for _, l := range f.Chain {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "replay: %s\n", f.Replay(o))
	path := c.trace
	if !traced {
		if path == "" {
			path = filepath.Join(os.TempDir(), fmt.Sprintf("sluice-sim-seed%d.ndjson", f.Seed))
		}
	}
	minPath := strings.TrimSuffix(path, ".ndjson") + ".min.ndjson"
	var tw, mw io.Writer
	var files []*os.File
	open := func(p string) io.Writer {
		fh, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(c.stderr, "sluice sim:", err)
			return nil
		}
		files = append(files, fh)
		return fh
	}
	if !traced {
		tw = open(path)
	}
	budget := c.budget
	if budget > 0 {
		mw = open(minPath)
	}
	if budget <= 0 {
		budget = time.Nanosecond
	}
	inv, err := Investigate(o, f, tw, mw, budget)
	for _, fh := range files {
		if cerr := fh.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = WriteTraceOptions(path, inv.Core)
	}
	if err == nil && mw != nil {
		err = WriteTraceOptions(minPath, inv.Core)
	}
	if err != nil {
		fmt.Fprintln(c.stderr, "sluice sim:", err)
		return
	}
	fmt.Fprintf(w, "trace: %s (%d events, options beside it)\n", path, inv.Recorded)
	if inv.Note != "" {
		fmt.Fprintf(w, "minimized: %s\n", inv.Note)
		return
	}
	if c.budget <= 0 {
		return
	}
	state := "complete"
	if !inv.Complete {
		state = "budget exhausted"
	}
	fmt.Fprintf(w, "minimized: %d of %d events (%d replays, %s); trace %s\n", inv.Kept, inv.Recorded, inv.Replays, state, minPath)
	for _, l := range inv.Minimized {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

func writeTimeline(path string, t *Timeline) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("sim: timeline: %w", err)
	}
	if err := t.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sim: timeline: %w", err)
	}
	return nil
}
