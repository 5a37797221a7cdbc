package check

import (
	"fmt"
	"sort"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/env"
)

func cfg(options string, slots int, mem int64) *core.Config {
	return &core.Config{Task: "tts", Engine: "fixture", Checkpoint: "ck", Options: options, Slots: slots, MemoryMB: mem}
}

// Bounds returns the named bounds. "small" and "small3" together are the
// bound of `make model-check` (and of the default go test); "large" is
// `make model-check-large`, "large-unreg" `make model-check-large-unreg`.
func Bounds() map[string]*env.Bound {
	table := abstract.NewConfigTable() // one for all: each bound's systems share it
	bounds := map[string]*env.Bound{
		// small: 2 models x 2 slots, 3 requests, 3 managers (one targeted:
		// reconfigure, load, unload or the re-registration of an
		// unregistered model; one unregister; one bulk unload over both), load,
		// probe and clone failures, too-small capacities, timeouts and
		// disconnects, idle retirement, a residency limit of one model
		// (eviction and refusal), shutdown and a repeated Release.
		"small": {
			Name:       "small",
			Table:      table,
			Models:     []string{"m0", "m1"},
			Registered: 2,
			Configs: []*core.Config{
				cfg("{}", 2, 100),            // registration
				cfg(`{"voice":"b"}`, 2, 100), // changed sessions: probed, then replaced
				cfg("{}", 1, 100),            // same sessions, fewer slots: replaced without probe
			},
			Options:         core.Options{MaxLoadedModels: 1, LoadBackoff: env.LoadBackoff},
			Requests:        3,
			AnyManagers:     1,
			Unregisters:     1,
			Bulks:           1,
			Selections:      [][]int{{0, 1}},
			Cancels:         2,
			Failures:        2,
			Ticks:           1,
			Shutdown:        true,
			StaleRelease:    true,
			BoundedRequests: true,
			Capacity:        4,
			Symmetry:        true,
			Liveness:        true,
		},
		// small3: the same clients (but no unregister: with one, 3.5 M
		// states instead of 0.47 M) over 3 models, one of them single-slot,
		// plus a second bulk unload whose selection overlaps the first in
		// reverse order, with room for two resident models and the global
		// cold-load guard.
		"small3": {
			Name:            "small3",
			Table:           table,
			Models:          []string{"m0", "m1", "m2"},
			Registered:      3,
			Configs:         []*core.Config{cfg("{}", 2, 100), cfg(`{"voice":"b"}`, 2, 100), cfg("{}", 1, 100)},
			InitConfigs:     []uint8{0, 0, 2},
			Options:         core.Options{MaxLoadedModels: 2, SerializeColdLoads: true, LoadBackoff: env.LoadBackoff},
			Requests:        3,
			AnyManagers:     1,
			Bulks:           2,
			Selections:      [][]int{{2, 0, 1}, {1, 0}},
			Cancels:         1,
			Failures:        1,
			Shutdown:        true,
			BoundedRequests: true,
			Capacity:        4,
			Symmetry:        true,
			Liveness:        true,
		},
		// large (the large bound): 3 models x 3 slots (room for two
		// resident), 5 requests to any model with any number in flight, 2
		// reconfigures (probed or direct), an unload and a bulk unload over
		// all three, managers with deadlines, one backend failure of any
		// kind and one timeout or disconnect; builds merged (see
		// env.Bound.MergeBuild). Core only: the spec has no merged builds.
		"large": {
			Name:       "large",
			Table:      table,
			Models:     []string{"m0", "m1", "m2"},
			Registered: 3,
			Configs: []*core.Config{
				cfg("{}", 3, 100),
				cfg(`{"voice":"b"}`, 3, 100),
				cfg("{}", 2, 100),
			},
			Options:         core.Options{MaxLoadedModels: 2},
			Requests:        5,
			Applies:         2,
			Unloads:         1,
			Bulks:           1,
			Selections:      [][]int{{0, 1, 2}},
			Cancels:         1,
			Failures:        1,
			BoundedRequests: true,
			BoundedManagers: true,
			Capacity:        4,
			MergeBuild:      true,
			Symmetry:        true,
		},
	}
	// large-unreg: the large bound with its unload replaced by an
	// unregister (DELETE /v1/models/{id}: the same barrier and teardown,
	// then the tombstone, and every ticket queued behind it answered
	// not_found), so that the unregister is checked at the large bound's
	// size. Both at once would multiply the states (small3 with an
	// unregister: 7.4 times), past this machine's memory.
	unreg := *bounds["large"]
	unreg.Name, unreg.Unloads, unreg.Unregisters = "large-unreg", 0, 1
	bounds[unreg.Name] = &unreg
	return bounds
}

// Bound returns the bound named name.
func Bound(name string) (*env.Bound, error) {
	b, ok := Bounds()[name]
	if !ok {
		var names []string
		for n := range Bounds() {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("check: no bound %q (have %v)", name, names)
	}
	return b, nil
}
