package check

import (
	"testing"

	"github.com/sluice-dev/sluice/spec/env"
	"github.com/sluice-dev/sluice/spec/mc"
)

func runCore(t *testing.T, _ *env.Bound, sys *CoreSystem) *mc.Result {
	t.Helper()
	res, err := mc.Run(sys, mc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
