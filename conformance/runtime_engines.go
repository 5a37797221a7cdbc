package conformance

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
)

// checkEngineHistory (engine.history): the short form of the engines'
// history-independence check (engines.ShortHistory) on every checkpoint of
// the models root: each request's answer after seeded shuffles of the
// others, at 1, 2 and 4 slots, equals its answer from a fresh pool. It
// drives the engines' sessions directly, as the runtime's slots do, not
// through the scheduler (whose part, slot choice, changes no bytes).
func checkEngineHistory(ctx context.Context, rr *runtimeRun) error {
	if err := checkModelsRoot(rr.modelsRoot); err != nil {
		return err
	}
	names := make([]string, 0, len(catalogue.DefaultNames))
	for _, n := range catalogue.DefaultNames {
		r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), n)
		if err != nil {
			return fmt.Errorf("conformance: %w (%w)", errUnavailable, err)
		}
		names = append(names, r.Manifest.Engine)
	}
	reg, err := realEngines(names)
	if err != nil {
		return err
	}
	cat, err := engines.ScanRoot(rr.modelsRoot, reg)
	if err != nil {
		return err
	}
	in, err := engines.Inputs(ctx, catalogue.DefaultSources(""))
	if err != nil {
		return err
	}
	_, err = engines.ShortHistory(ctx, cat, reg, in)
	return err
}
