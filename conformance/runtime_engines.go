package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
)

// engineRoot scans the models root with the real engines of the default
// checkpoints and builds the standard inputs.
func engineRoot(ctx context.Context, rr *runtimeRun) (*catalogue.Catalogue, backends.Registry, map[string][]backends.Request, error) {
	if err := checkModelsRoot(rr.modelsRoot); err != nil {
		return nil, nil, nil, err
	}
	names := make([]string, 0, len(catalogue.DefaultNames))
	for _, n := range catalogue.DefaultNames {
		r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), n)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("conformance: %w (%w)", errUnavailable, err)
		}
		names = append(names, r.Manifest.Engine)
	}
	reg, err := realEngines(names)
	if err != nil {
		return nil, nil, nil, err
	}
	cat, err := engines.ScanRoot(rr.modelsRoot, reg)
	if err != nil {
		return nil, nil, nil, err
	}
	in, err := engines.Inputs(ctx, catalogue.DefaultSources(""))
	if err != nil {
		return nil, nil, nil, err
	}
	return cat, reg, in, nil
}

// checkEngineHistory (engine.history): the short form of the engines'
// history-independence check (engines.ShortHistory) on every checkpoint of
// the models root: each request's answer after seeded shuffles of the
// others, at 1, 2 and 4 slots, equals its answer from a fresh pool. It
// drives the engines' sessions directly, as the runtime's slots do, not
// through the scheduler (whose part, slot choice, changes no bytes).
func checkEngineHistory(ctx context.Context, rr *runtimeRun) error {
	cat, reg, in, err := engineRoot(ctx, rr)
	if err != nil {
		return err
	}
	_, err = engines.ShortHistory(ctx, cat, reg, in)
	return err
}

// checkEngineCancel (engine.cancel): engines.ShortCancel on every
// checkpoint of the models root: the context is checked throughout a long
// request, a context that ends at the middle check ends the request with
// its error, and the next answer equals the one before.
func checkEngineCancel(ctx context.Context, rr *runtimeRun) error {
	cat, reg, in, err := engineRoot(ctx, rr)
	if err != nil {
		return err
	}
	_, err = engines.ShortCancel(ctx, cat, reg, in)
	return err
}

// checkEngineCost (engine.cost-bound): every checkpoint of the models root
// refuses a request over its bound (engines.OverLimit: text past 4,096
// characters, a WAV header stating two hours) as invalid naming the
// field, and then answers a standard request.
func checkEngineCost(ctx context.Context, rr *runtimeRun) error {
	cat, reg, in, err := engineRoot(ctx, rr)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		s, _, err := reg[cp.Engine].Open(ctx, engines.SpecFor(name, cp, 1))
		if err != nil {
			return err
		}
		req, param := engines.OverLimit(cp.Task)
		if _, err := s.Infer(ctx, req, nil); !errors.Is(err, backends.ErrInvalid) || backends.ParamOf(err) != param {
			errs = append(errs, fmt.Errorf("%s: over its bound: %v (param %q), want invalid naming %q", name, err, backends.ParamOf(err), param))
		} else if _, err := s.Infer(ctx, in[cp.Task][0], nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: after the refusal: %w", name, err))
		}
		_ = s.Close(ctx)
	}
	return errors.Join(errs...)
}

// checkEngineLoadSafety (engine.load-safety): engines.ShortMalformed in
// this process: damaged copies of every checkpoint of the models root
// (one file per checkpoint and damage) are each refused as invalid or
// served, and this process is still here to say so.
func checkEngineLoadSafety(ctx context.Context, rr *runtimeRun) error {
	cat, _, in, err := engineRoot(ctx, rr)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sluice-malformed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	refused, _, err := engines.ShortMalformed(ctx, cat, in, tmp)
	if err == nil && refused == 0 {
		err = fmt.Errorf("no damaged checkpoint was refused")
	}
	return err
}

// checkEngineMemory (engine.native-memory): engines.ShortChurn: in a
// child process (this executable re-executed, so the resident set is the
// churn's, not this runner's with its other cases), every checkpoint of
// the models root in turn runs engines.ShortChurnCycles load/unload
// cycles (open a one-slot pool, answer one standard request, close it);
// the resident set after them is at most engines.MaxChurnRatio times the
// one after engines.ShortChurnEarly. `make soak-engines` runs the long
// form.
func checkEngineMemory(ctx context.Context, rr *runtimeRun) error {
	cat, _, in, err := engineRoot(ctx, rr)
	if err != nil {
		return err
	}
	rows, err := engines.ShortChurn(ctx, cat, in)
	if err == nil && len(rows) != len(cat.Names()) {
		err = fmt.Errorf("%d of %d checkpoints churned", len(rows), len(cat.Names()))
	}
	return err
}
