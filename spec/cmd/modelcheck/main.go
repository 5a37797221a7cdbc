// Command modelcheck model-checks the spec transcription and the real core
// inside a named bound and prints the figures of every run.
//
//	go run ./spec/cmd/modelcheck -bound small,small3   # make model-check
//	go run ./spec/cmd/modelcheck -bound large          # make model-check-large
//	go run ./spec/cmd/modelcheck -bound large-unreg    # make model-check-large-unreg
//
// It exits 1 when a run finds a violation or stops incomplete.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/check"
)

func main() { os.Exit(run()) }

func run() int {
	bounds := flag.String("bound", "small,small3", "comma-separated bounds: small, small3, large, large-unreg")
	workers := flag.Int("workers", 0, "checker goroutines (0: GOMAXPROCS)")
	maxStates := flag.Int("max-states", 0, "stop beyond this many states (0: no limit)")
	maxTime := flag.Duration("max-time", 0, "stop each run after this long (0: no limit)")
	mutant := flag.String("mutant", "", "switch on a core mutant by name")
	specOnly := flag.Bool("spec-only", false, "explore only the spec transcription")
	coreOnly := flag.Bool("core-only", false, "explore only the core")
	noSym := flag.Bool("no-symmetry", false, "turn symmetry reduction off")
	replay := flag.Bool("replay-only", false, "rebuild every core state by replay from its initial state, never by cloning")
	labelAll := flag.Bool("label-all", false, "label interchangeable clients and models too (no transition reduction)")
	perTransition := flag.Bool("per-transition-invariants", false, "check core's and the spec's invariants on every transition into a core state, not once per state")
	exactKey := flag.Bool("exact-key", false, "keep what core leaves dead in the core's state keys")
	progress := flag.Bool("progress", false, "print a line per BFS level")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	gcPercent := flag.Int("gogc", 400, "garbage collector target percentage, unless GOGC is set")
	memLimit := flag.Int64("mem-limit-mb", 6144, "soft memory limit in MiB, unless GOMEMLIMIT is set (0: none)")
	flag.Parse()
	// The checker allocates short-lived states at a high rate over a
	// pointer-free table of fingerprints: collecting less often saves much
	// of the collector's time; the soft limit keeps the heap inside the
	// bound's memory budget.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(*gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" && *memLimit > 0 {
		debug.SetMemoryLimit(*memLimit << 20)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "modelcheck:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "modelcheck:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	o := check.Options{Workers: *workers, MaxStates: *maxStates, MaxTime: *maxTime, SpecOnly: *specOnly,
		CoreOnly: *coreOnly, NoSymmetry: *noSym, ReplayOnly: *replay, LabelAll: *labelAll, ExactKey: *exactKey,
		PerTransitionInvariants: *perTransition}
	if *progress {
		o.Progress = os.Stderr
	}
	if *mutant != "" {
		m, ok := core.ParseMutant(*mutant)
		if !ok {
			fmt.Fprintf(os.Stderr, "modelcheck: no mutant %q\n", *mutant)
			return 2
		}
		o.Mutants = m
	}
	start := time.Now()
	ok := true
	for _, name := range strings.Split(*bounds, ",") {
		b, err := check.Bound(strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "modelcheck:", err)
			return 2
		}
		rep, err := check.RunBound(b, os.Stdout, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "modelcheck:", err)
			return 2
		}
		ok = ok && rep.OK()
	}
	fmt.Printf("total time %.1fs\n", time.Since(start).Seconds())
	if !ok {
		return 1
	}
	return 0
}
