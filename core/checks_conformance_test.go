//go:build sluice_checks_conformance

package core_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/sluice-dev/sluice/conformance"
	"github.com/sluice-dev/sluice/conformance/inproc"
)

// TestCheckConformance is `make mutation`'s conformance check (see
// checks_test.go): the suite in process, without the linearizability
// histories.
func TestCheckConformance(t *testing.T) {
	var out bytes.Buffer
	if code := conformance.Main([]string{"--lin", "0", "--models-root", "../models"}, &out, io.Discard, inproc.Build); code != 0 {
		t.Fatalf("conformance exit %d:\n%s", code, out.String())
	}
}
