//go:build sluice_mutants

package conformance

import (
	"bytes"
	"strings"
	"testing"
)

// Against a server with a planted core bug the command fails and names the
// cell (the runner starts its own server, which reads SLUICE_MUTANTS).
func TestMainNamesTheCellAMutantBreaks(t *testing.T) {
	t.Setenv("SLUICE_MUTANTS", "lifo")
	var out, errb bytes.Buffer
	code := Main([]string{"--run", `^ops\.ready\.infer$`, "--lin", "0", "--step-timeout", "2s"}, &out, &errb, testBuild)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "FAILED cells: ops.ready.infer") {
		t.Fatalf("output does not name the cell:\n%s", out.String())
	}
}
