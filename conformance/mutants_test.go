//go:build sluice_mutants

package conformance

import (
	"bytes"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// TestMutants runs the whole suite once per planted core bug
// (core.AllMutants) on servers started from a build of cmd/sluice with
// SLUICE_MUTANTS (a process each: the runtime panics on some planted bugs),
// and prints which cells caught which mutant. It takes minutes, so it is
// built only with the sluice_mutants tag and run by `make
// conformance-mutants`; SLUICE_CONFORMANCE_MUTANTS=barge,lifo picks
// mutants, and
// SLUICE_CONFORMANCE_RUN=REGEX picks cases. Every mutant must be caught,
// except those no HTTP client can reach (UnreachableMutants).
func TestMutants(t *testing.T) {
	sel := os.Getenv("SLUICE_CONFORMANCE_MUTANTS")
	mus := core.AllMutants()
	if sel != "" && sel != "1" && sel != "all" {
		mus = nil
		for _, n := range regexp.MustCompile(`\s*,\s*`).Split(sel, -1) {
			m, ok := core.ParseMutant(n)
			if !ok {
				t.Fatalf("unknown mutant %q", n)
			}
			mus = append(mus, m)
		}
	}
	b, err := testBinary()
	if err != nil || b == "" {
		t.Fatalf("the mutant run needs a build of cmd/sluice: %v", err)
	}
	o := Options{Launcher: Binary{Path: b}, StepTimeout: 5 * time.Second, Slack: testSlack, Parallel: 12,
		ModelsRoot: DefaultModelsRoot("../models")}
	if re := os.Getenv("SLUICE_CONFORMANCE_RUN"); re != "" {
		o.Run = regexp.MustCompile(re)
	}
	res, err := RunMutants(loadSuite(t), o, mus, 4, t.TempDir(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	WriteMutantTable(&table, res)
	t.Log("\n" + table.String())
	for _, r := range res {
		if _, skip := UnreachableMutants[r.Mutant]; !r.Caught() && !skip {
			t.Errorf("mutant %s was not caught by any case", r.Mutant)
		}
	}
}
