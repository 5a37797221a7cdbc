package conformance

import (
	"strings"
	"testing"
)

// Every recorded device run reads: its log is embedded and holds each of
// its verdicts; a verdict its log lacks, or a run without one, is refused,
// so no cell is labelled from a line nobody can find.
func TestDeviceRunsHoldTheirVerdicts(t *testing.T) {
	runs, err := DeviceRuns()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 {
		t.Fatal("no device runs recorded")
	}
	for _, r := range runs {
		bad := r
		bad.Verdicts = append(append([]string{}, r.Verdicts...), r.Verdicts[0]+" (edited)")
		if err := bad.check(); err == nil || !strings.Contains(err.Error(), "not a line of its log") {
			t.Errorf("%s: an edited verdict passed: %v", r.Log, err)
		}
		none := r
		none.Verdicts = nil
		if err := none.check(); err == nil {
			t.Errorf("%s: a run without verdicts passed", r.Log)
		}
		gone := r
		gone.Log = "missing.log"
		if err := gone.check(); err == nil {
			t.Errorf("%s: a run whose log is missing passed", r.Log)
		}
	}
}
