// Command modelcheck model-checks the spec transcription and the real core
// inside a named bound and prints the figures of every run.
//
//	go run ./spec/cmd/modelcheck -bound small,small3   # make model-check
//	go run ./spec/cmd/modelcheck -bound large          # make model-check-large
//
// It exits 1 when a run finds a violation or stops incomplete.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/check"
)

func main() {
	bounds := flag.String("bound", "small,small3", "comma-separated bounds: small, small3, large")
	workers := flag.Int("workers", 0, "checker goroutines (0: GOMAXPROCS)")
	maxStates := flag.Int("max-states", 0, "stop beyond this many states (0: no limit)")
	maxTime := flag.Duration("max-time", 0, "stop each run after this long (0: no limit)")
	mutant := flag.String("mutant", "", "switch on a core mutant by name")
	specOnly := flag.Bool("spec-only", false, "explore only the spec transcription")
	coreOnly := flag.Bool("core-only", false, "explore only the core")
	noSym := flag.Bool("no-symmetry", false, "turn symmetry reduction off")
	replay := flag.Bool("replay-only", false, "copy core states by replay only, never by reflective clone")
	progress := flag.Bool("progress", false, "print a line per BFS level")
	flag.Parse()
	o := check.Options{Workers: *workers, MaxStates: *maxStates, MaxTime: *maxTime, SpecOnly: *specOnly,
		CoreOnly: *coreOnly, NoSymmetry: *noSym, ReplayOnly: *replay}
	if *progress {
		o.Progress = os.Stderr
	}
	if *mutant != "" {
		m, ok := core.ParseMutant(*mutant)
		if !ok {
			fmt.Fprintf(os.Stderr, "modelcheck: no mutant %q\n", *mutant)
			os.Exit(2)
		}
		o.Mutants = m
	}
	start := time.Now()
	ok := true
	for _, name := range strings.Split(*bounds, ",") {
		b, err := check.Bound(strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "modelcheck:", err)
			os.Exit(2)
		}
		rep, err := check.RunBound(b, os.Stdout, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "modelcheck:", err)
			os.Exit(2)
		}
		ok = ok && rep.OK()
	}
	fmt.Printf("total time %.1fs\n", time.Since(start).Seconds())
	if !ok {
		os.Exit(1)
	}
}
