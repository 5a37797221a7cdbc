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
