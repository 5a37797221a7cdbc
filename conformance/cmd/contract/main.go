// Command contract regenerates the Test and Label columns of CONTRACT.md
// from the conformance suite's cases and the verdicts of its last run
// (conformance/evidence.json, written by `make contract`'s run of
// TestConformance; only a passing case counts):
//
//	go run ./conformance/cmd/contract -write CONTRACT.md   rewrite the file
//	go run ./conformance/cmd/contract CONTRACT.md          check only: exit 1 when stale
//
// It prints how many cells carry each label, and with -cells every cell's
// label and tests.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/sluice-dev/sluice/conformance"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("contract", flag.ContinueOnError)
	fs.SetOutput(stderr)
	write := fs.Bool("write", false, "rewrite the file's Test and Label columns (default: only check)")
	cells := fs.Bool("cells", false, "print every cell with its label and tests")
	evPath := fs.String("evidence", conformance.EvidenceFile, "the verdicts of the last conformance run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path := "CONTRACT.md"
	if fs.NArg() > 0 {
		path = fs.Arg(0)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "contract:", err)
		return 1
	}
	suite, err := conformance.Load()
	if err != nil {
		fmt.Fprintln(stderr, "contract:", err)
		return 1
	}
	parsed, err := conformance.ParseContract(string(b))
	if err != nil {
		fmt.Fprintln(stderr, "contract:", err)
		return 1
	}
	ran, err := conformance.ReadRunEvidence(*evPath)
	if err != nil {
		fmt.Fprintln(stderr, "contract:", err)
		return 1
	}
	if err := ran.Stale(suite); err != nil {
		fmt.Fprintln(stderr, "contract:", err)
		return 1
	}
	ev, err := suite.Evidence(parsed, ran)
	if err != nil {
		fmt.Fprintln(stderr, "contract:", err)
		return 1
	}
	out, changed := conformance.RewriteContract(string(b), ev)
	n := conformance.LabelCounts(ev)
	fmt.Fprintf(stdout, "%d cells: D %d, P %d, U %d (%d cases)\n", len(parsed), n["D"], n["P"], n["U"], len(suite.Cases))
	if *cells {
		for _, c := range parsed {
			fmt.Fprintf(stdout, "%s %-48s %s\n", ev[c.ID].Label, c.ID, ev[c.ID].Test)
		}
	}
	if len(changed) == 0 {
		fmt.Fprintf(stdout, "%s is up to date\n", path)
		return 0
	}
	sort.Strings(changed)
	if !*write {
		fmt.Fprintf(stderr, "%s is stale in %d cells (run `make contract`): %v\n", path, len(changed), changed)
		return 1
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		fmt.Fprintln(stderr, "contract:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: rewrote %d cells\n", path, len(changed))
	return 0
}
