//go:build sluice_checks

package core_test

import (
	"bytes"
	"testing"

	"github.com/sluice-dev/sluice/sim"
	"github.com/sluice-dev/sluice/spec/check"
	"github.com/sluice-dev/sluice/spec/trace"
)

// The independent checks of core, one test each, for `make mutation`: the
// mutation tool mutates core and runs one of these (or core's own unit or
// rapid tests) per mutant, so its report says which checks kill which
// mutant. They are built only with the sluice_checks tag; the conformance
// suite, which links the whole server, has a tag of its own
// (checks_conformance_test.go), so the model checker's and the simulator's
// test binary, built once per mutant, stays small.

// TestCheckModel is the model checker at the make-test bound (small), the
// real core with refinement against the spec.
func TestCheckModel(t *testing.T) {
	b, err := check.Bound("small")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := check.RunBound(b, &out, check.Options{CoreOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("model checker:\n%s", out.String())
	}
}

// TestCheckSim is a simulator campaign: 100 seeds of 3000 events with the
// oracle, stopping at the first failure; then the ndjson traces of the
// first simTraces seeds, as `make trace-check` reads them, validated against
// the spec (the only check that reads the trace records core writes).
func TestCheckSim(t *testing.T) {
	res, err := sim.Campaign(sim.CampaignOptions{First: 1, Seeds: 100, StopAtFirst: true, Base: sim.Options{Steps: 3000}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) > 0 {
		t.Fatalf("simulator: %+v", res.Failures[0])
	}
	for seed := uint64(1); seed <= simTraces; seed++ {
		var buf bytes.Buffer
		r, err := sim.Run(sim.Options{Seed: seed, Steps: 3000, Shutdown: sim.ModeAlways, Trace: &buf})
		if err != nil || r.Failure != nil {
			t.Fatalf("seed %d: %v %+v", seed, err, r.Failure)
		}
		if _, err := trace.Validate(&buf, &r.Core); err != nil {
			t.Fatalf("seed %d: trace rejected: %v", seed, err)
		}
	}
}

// simTraces is how many seeds' traces TestCheckSim validates.
const simTraces = 8
