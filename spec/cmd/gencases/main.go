// Command gencases writes the conformance cases generated from the spec
// (conformance/matrices/gen.yaml) and prints the coverage of the spec's
// (state, action) pairs by generated and hand-written cases.
//
//	go run ./spec/cmd/gencases -write conformance/matrices/gen.yaml   # make generate-cases
//	go run ./spec/cmd/gencases -check conformance/matrices/gen.yaml   # fails when it drifted
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluice-dev/sluice/spec/gen"
)

func main() { os.Exit(run()) }

func run() int {
	write := flag.String("write", "", "write the generated matrix to this file")
	check := flag.String("check", "", "fail when this file differs from the generated matrix")
	matrices := flag.String("matrices", "conformance/matrices", "the hand-written matrices, for the coverage table")
	flag.Parse()
	start := time.Now()
	rs, err := gen.WalkAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencases:", err)
		return 2
	}
	text := gen.Render(rs, gen.Bounds)
	for k, res := range rs {
		fmt.Printf("%s: spec states %d, (state, action) pairs %d, cases generated %d, left open by the spec %d, unobservable %d\n",
			gen.Bounds[k].Name, res.States, res.Pairs, len(res.Cases), res.Open, res.Unobservable)
	}
	fmt.Printf("walked in %.1fs\n", time.Since(start).Seconds())
	if *matrices != "" {
		// Hand-written cases are interpreted on the one-model walk only.
		cov, err := gen.HandCoverage(os.DirFS(*matrices), rs[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, "gencases:", err)
			return 2
		}
		cov.Print(os.Stdout)
	}
	if *write != "" {
		if err := os.WriteFile(*write, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gencases:", err)
			return 2
		}
	}
	if *check != "" {
		b, err := os.ReadFile(*check)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gencases:", err)
			return 2
		}
		if !bytes.Equal(b, []byte(text)) {
			fmt.Fprintf(os.Stderr, "gencases: %s differs from what the spec generates: run make generate-cases\n", *check)
			return 1
		}
	}
	return 0
}
