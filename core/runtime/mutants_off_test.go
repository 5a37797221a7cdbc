//go:build !sluice_mutants

package runtime

import (
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// A build without the sluice_mutants tag ignores MutantsEnv: the server
// of a shipped binary cannot be told to plant a bug.
func TestMutantsEnvIgnored(t *testing.T) {
	t.Setenv(MutantsEnv, "lifo,barge")
	if mu, err := mutantsFromEnv(nil); mu != 0 || err != nil {
		t.Fatalf("mutantsFromEnv = %v, %v", mu, err)
	}
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(t.Context())
	if core.MutantsBuilt() {
		t.Fatal("core has mutants in a build without the tag")
	}
}
