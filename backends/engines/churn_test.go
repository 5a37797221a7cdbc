package engines

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
)

// fixtureChurn churns a fixture whose every load keeps leakKB KiB, in a
// child, at the short form's sizes.
func fixtureChurn(t *testing.T, leakKB int) ChurnRow {
	t.Helper()
	spec := backends.Spec{Model: "leak", Task: "tts", Engine: fixture.Name, Slots: 1,
		Options: []byte(`{"capacity":1,"leak_kb":` + strconv.Itoa(leakKB) + `}`)}
	rows, err := ChurnInChild(context.Background(), ChurnJob{Targets: []ChurnTarget{{Checkpoint: "fixture-leak-" + strconv.Itoa(leakKB),
		Spec: spec, Input: []byte(`{}`)}}, Early: ShortChurnEarly, Cycles: ShortChurnCycles})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rows[0])
	return rows[0]
}

// TestChurnCatchesLeak: the short churn (engine.native-memory) fails an
// engine that keeps 8 MiB per load (the fixture's leak_kb: 40 MiB after 5
// cycles, 200 MiB after 25, over a child's own few MB), and passes the
// same engine without the leak. The resident set is the child's own: the
// test binary's is not in it.
func TestChurnCatchesLeak(t *testing.T) {
	leaky := fixtureChurn(t, 8<<10)
	if err := CheckChurn([]ChurnRow{leaky}); err == nil {
		t.Fatalf("a load that keeps 8 MiB passed the churn check: %v", leaky)
	} else if !strings.Contains(err.Error(), "grew more than") {
		t.Fatalf("the leak's error: %v", err)
	}
	if grown := leaky.LastMB - leaky.EarlyMB; grown < 8*(ShortChurnCycles-ShortChurnEarly)*9/10 {
		t.Fatalf("the leak grew the child by %.0f MB, want about %d", grown, 8*(ShortChurnCycles-ShortChurnEarly))
	}
	flat := fixtureChurn(t, 0)
	if err := CheckChurn([]ChurnRow{flat}); err != nil {
		t.Fatalf("a load that keeps nothing: %v", err)
	}
}

// TestChurnChildFailure: a churn the child cannot run (an engine it does
// not have) is an error naming the engine, not a row.
func TestChurnChildFailure(t *testing.T) {
	_, err := ChurnInChild(context.Background(), ChurnJob{Targets: []ChurnTarget{{Checkpoint: "ghost", Spec: backends.Spec{Engine: "ghost", Slots: 1}}},
		Early: 1, Cycles: 2})
	if err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("a churn of an unknown engine: %v", err)
	}
}
