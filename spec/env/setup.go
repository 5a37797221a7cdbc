package env

import (
	"fmt"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// Setups returns, for every initial state, the labels that build it from
// an empty registry: the first Registered models are registered with
// Configs[0]; cold ones fail their first load (registered, unloaded; with
// a load backoff an unload then ends it), warm ones (the last k, for each
// k allowed) load completely. Both the spec and
// the core replay these labels, outside the budget.
func (b *Bound) Setups() ([][]Label, error) {
	maxWarm := 0
	if b.Warm {
		maxWarm = b.Registered
		if n := b.Options.MaxLoadedModels; n > 0 && n < maxWarm {
			maxWarm = n
		}
	}
	p := b.Params()
	var out [][]Label
	for k := 0; k <= maxWarm; k++ {
		s := &abstract.State{}
		var labels []Label
		step := func(l Label) error {
			outs, err := abstract.Step(s, b.Action(s, l), p)
			if err != nil {
				return err
			}
			if len(outs) != 1 {
				return fmt.Errorf("env: setup step %s has %d outcomes", b.Describe(l), len(outs))
			}
			s = outs[0].State
			labels = append(labels, l)
			return nil
		}
		for i := 0; i < b.Registered; i++ {
			warm := i >= b.Registered-k
			if err := step(Label{Kind: core.EvSubmitManager, Model: uint8(i), Op: core.OpApply, Cfg: b.InitConfig(i)}); err != nil {
				return nil, err
			}
			for {
				md := &s.Models[s.Lookup(b.Models[i])]
				var l Label
				switch md.Job {
				case abstract.JLoad:
					l = Label{Kind: core.EvLoadDone, Model: uint8(i), Failed: !warm}
				case abstract.JClone:
					l = Label{Kind: core.EvCloneDone, Model: uint8(i)}
				case abstract.JNone:
				default:
					return nil, fmt.Errorf("env: setup of %s waits for %s", b.Models[i], md.Job)
				}
				if md.Job == abstract.JNone {
					break
				}
				if err := step(l); err != nil {
					return nil, err
				}
			}
			if md := &s.Models[s.Lookup(b.Models[i])]; md.Backoff {
				// A cold model's failed first load backs off; an unload
				// manager ends that, so a cold model starts out as one
				// that never loaded (CONTRACT fail.load-backoff).
				if err := step(Label{Kind: core.EvSubmitManager, Model: uint8(i), Op: core.OpUnload}); err != nil {
					return nil, err
				}
			}
			if md := &s.Models[s.Lookup(b.Models[i])]; md.HasMgr || len(md.Queue) > 0 || md.Backoff || (warm != (md.Life == core.Ready)) {
				return nil, fmt.Errorf("env: setup of %s ended in %s", b.Models[i], md.Life)
			}
		}
		out = append(out, labels)
	}
	return out, nil
}
