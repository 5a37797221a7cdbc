package conformance

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// runEvidence reads the committed verdicts of the last conformance run and
// fails when they do not name exactly the suite's cases.
func runEvidence(t *testing.T) *RunEvidence {
	t.Helper()
	ran, err := ReadRunEvidence("../" + EvidenceFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := ran.Stale(loadSuite(t)); err != nil {
		t.Fatal(err)
	}
	return ran
}

// TestContractFresh fails when CONTRACT.md's Test and Label columns differ
// from what `make contract` would write from the committed run evidence,
// naming the cells.
func TestContractFresh(t *testing.T) {
	b, cells := readContract(t)
	ev, err := loadSuite(t).Evidence(cells, runEvidence(t))
	if err != nil {
		t.Fatal(err)
	}
	_, changed := RewriteContract(string(b), ev)
	if len(changed) > 0 {
		sort.Strings(changed)
		var detail strings.Builder
		for _, c := range cells {
			for _, id := range changed {
				if c.ID == id {
					detail.WriteString("\n  " + id + ": has " + c.Test + " | " + c.Label + "; want " + ev[id].Test + " | " + ev[id].Label)
				}
			}
		}
		t.Fatalf("CONTRACT.md is stale in %d cells; run `make contract` (go run ./conformance/cmd/contract -write CONTRACT.md):%s",
			len(changed), detail.String())
	}
}

// The generator round-trips: rewriting twice changes nothing more, and
// only the last two columns change.
func TestRewriteContractOnlyEvidence(t *testing.T) {
	b, cells := readContract(t)
	ev, err := loadSuite(t).Evidence(cells, runEvidence(t))
	if err != nil {
		t.Fatal(err)
	}
	once, _ := RewriteContract(string(b), ev)
	twice, changed := RewriteContract(once, ev)
	if twice != once || len(changed) != 0 {
		t.Fatalf("second rewrite changed %v", changed)
	}
	after, err := ParseContract(once)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(cells) {
		t.Fatalf("%d cells after rewrite, %d before", len(after), len(cells))
	}
	for i := range cells {
		if after[i].ID != cells[i].ID || after[i].Behaviour != cells[i].Behaviour {
			t.Fatalf("cell %s: text changed by the rewrite", cells[i].ID)
		}
		if e := ev[cells[i].ID]; after[i].Test != e.Test || after[i].Label != e.Label {
			t.Fatalf("cell %s: got %q %q, want %q %q", cells[i].ID, after[i].Test, after[i].Label, e.Test, e.Label)
		}
	}
	runs, err := DeviceRuns()
	if err != nil {
		t.Fatal(err)
	}
	onDevice := map[string]bool{}
	for _, r := range runs {
		for _, id := range r.Covers {
			onDevice[id] = true
		}
	}
	for _, c := range after {
		if c.GPUOnly && c.Label == "D" && !onDevice[c.ID] {
			t.Fatalf("GPU-only cell %s labelled D without a recorded device run", c.ID)
		}
	}
}

// The tests an area names outside this suite (Area.External) exist: each
// "DIR TestName" is a Go test in that package folder, each "make TARGET" a
// target of the Makefile. A renamed test or target must not leave CONTRACT.md
// naming evidence that is gone.
func TestAreaExternalEvidenceExists(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for id, a := range loadSuite(t).Areas {
		for _, x := range a.External {
			dir, name, ok := strings.Cut(x, " ")
			switch {
			case !ok:
				t.Errorf("area %s: external evidence %q is not \"DIR TestName\" or \"make TARGET\"", id, x)
			case dir == "make":
				if !strings.Contains("\n"+string(mk), "\n"+name+":") {
					t.Errorf("area %s: the Makefile has no target %s", id, name)
				}
			default:
				files, _ := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
				found := false
				for _, f := range files {
					b, err := os.ReadFile(f)
					if err == nil && strings.Contains(string(b), "\nfunc "+name+"(t *testing.T)") {
						found = true
					}
				}
				if !found {
					t.Errorf("area %s: no test %s in %s", id, name, dir)
				}
			}
		}
	}
}

// Labels come from what ran: a cell whose only full cases were skipped (or
// failed) is no longer D, and with no passing case at all it is U.
func TestLabelsNeedPassingCases(t *testing.T) {
	_, cells := readContract(t)
	s := loadSuite(t)
	ran := runEvidence(t)
	ev, err := s.Evidence(cells, ran)
	if err != nil {
		t.Fatal(err)
	}
	const cell = "ops.ready.infer"
	if ev[cell].Label != "D" {
		t.Fatalf("%s is %s with every case passing", cell, ev[cell].Label)
	}
	skipped := &RunEvidence{Cases: map[string]string{}}
	for name, v := range ran.Cases {
		skipped.Cases[name] = v
	}
	for _, c := range s.Cases {
		for _, id := range append(append([]string(nil), c.Covers...), c.Partial...) {
			if id == cell {
				skipped.Cases[c.Name] = Skip
			}
		}
	}
	ev, err = s.Evidence(cells, skipped)
	if err != nil {
		t.Fatal(err)
	}
	if ev[cell].Label != "U" {
		t.Fatalf("%s is %s (%s) with its cases skipped, want U", cell, ev[cell].Label, ev[cell].Test)
	}
	if err := ran.Drift(map[string]string{s.Cases[0].Name: Skip}); err == nil {
		t.Fatal("a skipped case that the evidence records as passing is no drift")
	}
}

// readContract returns the repository's CONTRACT.md and its cells.
func readContract(t *testing.T) ([]byte, []Cell) {
	t.Helper()
	b, err := os.ReadFile("../CONTRACT.md")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := ParseContract(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return b, cells
}
