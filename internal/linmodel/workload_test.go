package linmodel

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestGenConfigs(t *testing.T) {
	for seed := range uint64(200) {
		cfgs := GenConfigs(rand.New(rand.NewPCG(seed, 0x5eed)))
		if again := GenConfigs(rand.New(rand.NewPCG(seed, 0x5eed))); !reflect.DeepEqual(cfgs, again) {
			t.Fatalf("seed %d: two draws differ", seed)
		}
		if len(cfgs) != 6 {
			t.Fatalf("seed %d: %d configs", seed, len(cfgs))
		}
		opts := map[int]string{}
		for i, c := range cfgs {
			if c.Slots < 1 || c.Slots > 3 || c.MemoryMB != int64(c.Family+1) {
				t.Errorf("seed %d cfg%d: %+v", seed, i, c)
			}
			// Equal families have equal options (sameSessions).
			if o, ok := opts[c.Family]; ok && o != c.OptionJSON {
				t.Errorf("seed %d: family %d has two option sets", seed, c.Family)
			}
			opts[c.Family] = c.OptionJSON
		}
		sp := Spec{Configs: cfgs}
		if n := strings.Count(sp.DescribeConfigs(), "\n"); n != 6 {
			t.Errorf("seed %d: %d lines describe 6 configs", seed, n)
		}
	}
}

func TestDrawBulk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]int{}
	dups := 0
	for range 2000 {
		m := DrawBulk(rng)
		if len(m) > 1 && m[len(m)-1] == m[0] {
			dups++
			m = m[:len(m)-1]
		}
		for k, i := range m {
			if i < 0 || i > Models || k > 0 && m[k-1] >= i {
				t.Fatalf("members %v", m)
			}
			seen[i]++
		}
	}
	if len(seen) != Models+1 || dups == 0 {
		t.Errorf("2000 draws name %v, with %d duplicates: want every ID and some duplicates", seen, dups)
	}
}
