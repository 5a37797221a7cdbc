//go:build sluice_mutants

package runtime

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/internal/linmodel"
)

// The check has teeth: with a planted core bug that binds requests to the
// old config version after a reconfigure (core.MutStaleMetadata), and the
// core's own invariant checks off, porcupine finds a history that is not
// linearizable.
func TestLinearizableCatchesStaleMetadata(t *testing.T) {
	for seed := int64(1); seed <= 2000; seed++ {
		var h *linmodel.History
		synctest.Test(t, func(t *testing.T) { h = runHistory(t, seed, core.MutStaleMetadata) })
		if res, msg := checkHistory(seed, h); res == porcupine.Illegal {
			t.Logf("caught after %d histories: %s", seed, strings.SplitN(msg, "\n", 2)[0])
			return
		}
	}
	t.Fatal("porcupine did not notice stale metadata in 2000 histories")
}
