package linmodel

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// GenConfigs draws a history's config table: three families of options
// (equal options within a family, memory_mb naming the family: 1, 2, 3) and
// six configs over them with slot counts, admission timeouts, queue limits
// and the odd config validation refuses.
func GenConfigs(rng *rand.Rand) []Config {
	type family struct {
		capacity            int
		failLoad, failProbe bool
		failClone           int
		opts                string
	}
	fams := make([]family, 3)
	for f := range fams {
		x := family{capacity: 3 + rng.IntN(2), failLoad: rng.IntN(10) == 0, failProbe: rng.IntN(7) == 0}
		if rng.IntN(4) == 0 {
			x.capacity = 1 + rng.IntN(2) // too small for some slot counts
		}
		if rng.IntN(10) == 0 {
			x.failClone = 1 + rng.IntN(2)
		}
		x.opts = fmt.Sprintf(`{"capacity":%d,"fail_load":%v,"fail_probe":%v,"fail_clone_at":%d,"load_ms":%d,"clone_ms":%d,"probe_ms":%d,"teardown_ms":%d,"infer_ms":%d,"memory_mb":%d}`,
			x.capacity, x.failLoad, x.failProbe, x.failClone, rng.IntN(3), rng.IntN(2), rng.IntN(2), rng.IntN(3), rng.IntN(3), f+1)
		fams[f] = x
	}
	cfgs := make([]Config, 6)
	for i := range cfgs {
		f := rng.IntN(len(fams))
		x := fams[f]
		c := Config{Family: f, Slots: 1 + rng.IntN(3), Capacity: x.capacity, FailLoad: x.failLoad, FailProbe: x.failProbe,
			FailClone: x.failClone, MemoryMB: int64(f + 1), OptionJSON: x.opts}
		if rng.IntN(5) == 0 {
			c.Admission = 1 + rng.IntN(3)
		}
		if rng.IntN(10) == 0 {
			c.MaxQueue = 1 + rng.IntN(2)
		}
		c.Invalid = rng.IntN(25) == 0
		cfgs[i] = c
	}
	return cfgs
}

// DescribeConfigs is the config table, a line a config, for a failure
// message.
func (sp *Spec) DescribeConfigs() string {
	var b strings.Builder
	for i, c := range sp.Configs {
		fmt.Fprintf(&b, "  cfg%d: family %d slots %d admission %dms max_queue %d invalid %v %s\n",
			i, c.Family, c.Slots, c.Admission, c.MaxQueue, c.Invalid, c.OptionJSON)
	}
	return b.String()
}

// DrawBulk draws the members of a bulk unload (model indexes): each model
// and the ID that is never registered with probability one half, and now
// and then the first again, since a duplicate counts once (CONTRACT.md
// "Bulk work").
func DrawBulk(rng *rand.Rand) []int {
	var members []int
	for i := range Models + 1 {
		if rng.IntN(2) == 0 {
			members = append(members, i)
		}
	}
	if len(members) > 1 && rng.IntN(3) == 0 {
		members = append(members, members[0])
	}
	return members
}
