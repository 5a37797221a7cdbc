package conformance

import (
	"os"
	"strconv"
	"testing"
)

// TestLinearizableHTTP runs random concurrent workloads against the shared
// loopback server and checks every history with porcupine.
// SLUICE_CONFORMANCE_LIN sets the number of histories (default 8).
func TestLinearizableHTTP(t *testing.T) {
	t.Parallel()
	n := 8
	if v, err := strconv.Atoi(os.Getenv("SLUICE_CONFORMANCE_LIN")); err == nil {
		n = v
	}
	rep := RunLin(LinOptions{Target: sharedURL, Histories: n, OutDir: t.TempDir()})
	t.Logf("%d histories, %d operations, first seed %d", rep.Histories, rep.Operations, rep.Seed)
	if !rep.OK() {
		t.Fatal(rep.Error)
	}
}
