//go:build sluice_mutants

package coremodel

import (
	"testing"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/env"
)

// TestDisciplineCatchesDoubleRelease: the ticket rules notice a mutated
// machine accepting a release of a finished lease.
func TestDisciplineCatchesDoubleRelease(t *testing.T) {
	b := bound()
	setups, _ := b.Setups()
	d, err := Replay(b, core.MutDoubleRelease, setups[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Apply(env.Label{Kind: core.EvSubmitRequest, Model: 0, Bounded: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = res
	for d.M.JobsInFlight() > 0 {
		vs := d.Views()
		ls := b.Enabled(d.Abstract(vs), d.Budget, nil)
		for _, l := range ls {
			if (l.Kind == core.EvLoadDone || l.Kind == core.EvCloneDone) && !l.Failed && l.Cap == env.CapHigh {
				if _, err := d.Apply(l); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	}
	res, err = d.Apply(env.Label{Kind: core.EvRelease}) // a stale ticket
	if err != nil {
		t.Fatal(err)
	}
	if res.Discipline == nil {
		t.Fatal("a release of a finished lease went unnoticed")
	}
}
