package trace

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/coremodel"
	"github.com/sluice-dev/sluice/spec/env"
)

// GenOptions choose a random trace.
type GenOptions struct {
	Seed    uint64
	Steps   int          // events after registration (default 200)
	Mutants core.Mutants // planted bugs in the machine that writes the trace

	_ struct{}
}

func genCfg(options string, slots int, mem int64, maxq int) *core.Config {
	return &core.Config{Task: "tts", Engine: "fixture", Checkpoint: "ck", Options: options, Slots: slots, MemoryMB: mem,
		MaxQueue: maxq}
}

// RandomBound returns the random environment of seed: 2 or 3 models (and an
// ID never registered unless a client registers it), random residency limits,
// cold-load guard and idle retirement, and generous budgets.
func RandomBound(seed uint64) *env.Bound {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	n := 2 + rng.IntN(2)
	models := []string{"a", "b", "c"}[:n]
	models = append(models, "zz")
	b := &env.Bound{
		Name:       fmt.Sprintf("random-%d", seed),
		Table:      abstract.NewConfigTable(),
		Models:     models,
		Registered: n,
		Configs: []*core.Config{genCfg("{}", 2, 100, 0), genCfg(`{"voice":"b"}`, 2, 100, 0), genCfg("{}", 1, 100, 0),
			genCfg("{}", 3, 150, 0), genCfg("{}", 2, 100, 2)},
		InitConfigs:     []uint8{0, 0, 2, 0},
		Options:         core.Options{MaxLoadedModels: rng.IntN(3), SerializeColdLoads: rng.IntN(2) == 0},
		Requests:        40,
		AnyManagers:     8,
		Unregisters:     3,
		Bulks:           3,
		Selections:      [][]int{{0, 1}, {1, 0, n}, {n - 1}},
		Cancels:         12,
		Failures:        8,
		Ticks:           rng.IntN(4),
		Shutdown:        true,
		StaleRelease:    true,
		BoundedRequests: rng.IntN(3) > 0,
		BoundedManagers: rng.IntN(2) == 0,
		Capacity:        4,
		// Random traces pick among every client, also those a model checker
		// need not tell apart: which of them a mutant mistreats matters.
		LabelAll: true,
	}
	if rng.IntN(3) == 0 {
		b.Options.MemoryBudgetMB = 250
	}
	return b
}

// Generate drives a core.Machine (with o.Mutants) with random events of
// RandomBound(o.Seed), from an empty registry, and writes every event and
// effect as ndjson core.Record lines to w. It returns the bound's machine
// options, which belong beside the trace.
func Generate(w io.Writer, o GenOptions) (core.Options, error) {
	b := RandomBound(o.Seed)
	if o.Steps == 0 {
		o.Steps = 200
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x7ace))
	d, err := coremodel.New(b, o.Mutants)
	if err != nil {
		return core.Options{}, err
	}
	bw := bufio.NewWriter(w)
	apply := func(l env.Label) error {
		res, err := d.Apply(l)
		if err != nil {
			return err
		}
		ev := d.Last
		rec := core.EventRecord(ev, core.Ticket(res.Label.Ticket))
		line, err := core.MarshalRecord(rec)
		if err != nil {
			return err
		}
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		for _, r := range effects(d) {
			line, err := core.MarshalRecord(r)
			if err != nil {
				return err
			}
			if _, err := bw.Write(line); err != nil {
				return fmt.Errorf("trace: %w", err)
			}
		}
		return nil
	}
	setups, err := b.Setups()
	if err != nil {
		return core.Options{}, err
	}
	for _, l := range setups[0] {
		if err := apply(l); err != nil {
			return core.Options{}, err
		}
	}
	d.Budget = b.Start()
	var labels []env.Label
	for step := 0; step < o.Steps; step++ {
		labels = b.Enabled(d.Abstract(d.Views()), d.Budget, labels)
		var pick []env.Label
		for _, l := range labels {
			// Shutdown only late, so most of a trace runs before it.
			if l.Kind == core.EvBeginShutdown && step < o.Steps*3/4 {
				continue
			}
			pick = append(pick, l)
			if l.Fair { // let work finish more often than it starts
				pick = append(pick, l)
			}
		}
		if len(pick) == 0 {
			break
		}
		if err := apply(pick[rng.IntN(len(pick))]); err != nil {
			return core.Options{}, err
		}
	}
	if err := bw.Flush(); err != nil {
		return core.Options{}, fmt.Errorf("trace: %w", err)
	}
	return b.MachineOptions(), nil
}

func effects(d *coremodel.Driver) []core.Record {
	out := make([]core.Record, 0, len(d.Effects))
	for _, e := range d.Effects {
		out = append(out, d.M.EffectRecord(d.Last.Now, e))
	}
	return out
}
