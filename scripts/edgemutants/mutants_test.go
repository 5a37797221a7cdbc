package main

import (
	"path/filepath"
	"testing"
)

// TestMutantsApply keeps the planted edge bugs in step with the code:
// each mutant's text must still occur where it edits (a refactor that
// moves the text would otherwise leave make edge-mutants failing at its
// start, found only when someone runs the hour-long table).
func TestMutantsApply(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range mutants {
		if names[m.name] {
			t.Errorf("mutant %s: name used twice", m.name)
		}
		names[m.name] = true
		if err := m.check(root); err != nil {
			t.Error(err)
		}
	}
}

// TestWithRun: -tests replaces a check's own -run and keeps its packages.
func TestWithRun(t *testing.T) {
	for _, c := range allChecks {
		got := withRun(c.args, "X")
		n := 0
		for i, a := range got {
			if a == "-run" {
				n++
				if i+1 >= len(got) || got[i+1] != "X" {
					t.Errorf("%s: %v: -run not followed by X", c.name, got)
				}
			}
		}
		if n != 1 || got[0] != "test" || got[len(got)-1] != c.args[len(c.args)-1] {
			t.Errorf("%s: withRun(%v) = %v", c.name, c.args, got)
		}
	}
}

// TestFailedTests: the innermost failed tests are named, parents dropped.
func TestFailedTests(t *testing.T) {
	out := "--- FAIL: TestConformance (1.0s)\n    --- FAIL: TestConformance/a.b (0.1s)\n    --- FAIL: TestConformance/c~d (0.1s)\n--- FAIL: TestX (0.0s)\nFAIL\n"
	if got, want := failedTests(out), "TestConformance/a.b TestConformance/c~d TestX"; got != want {
		t.Errorf("failedTests = %q, want %q", got, want)
	}
	if got := failedTests("ok\n(timed out)"); got != "(timed out)" {
		t.Errorf("a timeout: %q", got)
	}
}
