package sim

import (
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// TestWhatIfOnSimulatorTraces: traces of simulated runs (failures,
// disconnects, timeouts, managers, bulk unloads) replayed as a what-if
// under their own configuration have every model's recorded figures:
// requests, grants, refusals, loads and waits.
func TestWhatIfOnSimulatorTraces(t *testing.T) {
	for _, seed := range []string{"3", "7", "12"} {
		p := simTrace(t, seed)
		rec, err := ReplayTraceFile(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := WhatIfTraceFile(p, core.Options{}, WhatIf{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		want := strings.Count(string(b), `"ev":"SubmitRequest"`)
		n, same := 0, 0
		for k, m := range got.Models {
			n += m.Requests
			if k < len(rec.Models) {
				r := rec.Models[k]
				if r.Model == m.Model && r.Requests == m.Requests && r.Granted == m.Granted && r.Busy == m.Busy &&
					r.Loads == m.Loads && r.WaitP50 == m.WaitP50 && r.WaitP99 == m.WaitP99 && r.WaitMax == m.WaitMax {
					same++
				}
			}
		}
		t.Logf("seed %s: %d models, %d with the recorded figures", seed, len(got.Models), same)
		if same != len(rec.Models) || len(got.Models) != len(rec.Models) {
			t.Fatalf("seed %s: recorded %+v\nwhat-if %+v", seed, rec.Models, got.Models)
		}
		if n != want {
			t.Fatalf("seed %s: %d requests replayed, the trace has %d", seed, n, want)
		}
	}
}
