// Command mutants reports, for each planted bug of core (core.AllMutants),
// whether the model checker finds it at the make-test bounds and how many
// random traces of the mutated core the trace validator rejects.
//
//	go run ./spec/cmd/mutants [-traces 50] [-json]
//
// Text output is one line per mutant:
//
//	mutant=NAME<TAB>modelcheck=caught bound=B check=KIND:NAME length=N states=S<TAB>refinement-alone=caught length=N<TAB>tracecheck=caught rejected=R/T
//
// (modelcheck=missed / tracecheck=missed when not caught), then a summary
// line. With -json each line is a JSON object (see mutants.Result). It
// exits 1 when some mutant escapes either check.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/spec/mutants"
)

func main() {
	traces := flag.Int("traces", 50, "random traces per mutant")
	steps := flag.Int("steps", 150, "events per random trace")
	asJSON := flag.Bool("json", false, "one JSON object per mutant")
	flag.Parse()
	res, err := mutants.Run(os.Stdout, mutants.Options{Traces: *traces, TraceSteps: *steps, JSON: *asJSON})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(2)
	}
	for _, r := range res {
		if !r.ModelCheck || !r.TraceCheck {
			os.Exit(1)
		}
	}
}
