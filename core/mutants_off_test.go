//go:build !sluice_mutants

package core

import (
	"strings"
	"testing"
)

// A build without the sluice_mutants tag has no planted bugs: New refuses
// every one of them.
func TestMutantsNotBuilt(t *testing.T) {
	if MutantsBuilt() {
		t.Fatal("MutantsBuilt in a build without the tag")
	}
	for _, mu := range AllMutants() {
		if _, err := New(Options{Mutants: mu}); err == nil || !strings.Contains(err.Error(), "sluice_mutants") {
			t.Fatalf("%s: New gave %v", mu, err)
		}
	}
}
