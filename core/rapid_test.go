package core

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"pgregory.net/rapid"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(label string, n int) int { return rapid.IntRange(0, n-1).Draw(c.t, label) }

var rapidOptions = []Options{
	{},
	{MaxLoadedModels: 2, IdleTimeout: 20_000},
	{MemoryBudgetMB: 250, SerializeColdLoads: true, DefaultAdmissionTimeout: 6000, LoadBackoff: 4000, LoadBackoffMax: 9000},
	{MaxLoadedModels: 1, AdmissionCeiling: 5000, LoadBackoff: 1500},
	// Residency pressure without idle retirement: three models, room for
	// two, so loads evict and the least recently used choice matters
	// (CONTRACT.md res.victim-choice).
	{MaxLoadedModels: 2},
	{MemoryBudgetMB: 200},
}

// TestRapidMachine lets rapid choose every next event among all that can
// happen (requests and managers on three models, bulk unloads, completions
// and failures of every backend step, timeouts, disconnects, ticks,
// shutdown), checks the invariants and the client-visible reference model
// after every step, drains to quiescence, and replays the trace.
//
// SLUICE_RAPID_CHECKS sets -rapid.checks for runners that cannot pass test
// flags (make mutation's rapid check runs through gremlins, which takes
// only GOFLAGS, so it sets 5000 here, as make test does with the flag).
func TestRapidMachine(t *testing.T) {
	if n := os.Getenv("SLUICE_RAPID_CHECKS"); n != "" {
		if err := flag.Set("rapid.checks", n); err != nil {
			t.Fatalf("SLUICE_RAPID_CHECKS: %v", err)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		opts := rapidOptions[rapid.IntRange(0, len(rapidOptions)-1).Draw(rt, "options")]
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		w, err := runWorkload(rapidChooser{rt}, opts, steps)
		if err != nil {
			rt.Fatalf("%v", err)
		}
		if err := w.replay(opts); err != nil {
			rt.Fatalf("%v", err)
		}
	})
}

// TestRapidBounds draws every bounded field of Options and Config from
// its edges (one below the lower bound, the bound, a value inside, the
// upper bound, one above) and wants New and Config.Validate to accept
// exactly the combinations whose every field is in range, known by
// construction (CONTRACT.md fail.spec-bounds).
func TestRapidBounds(t *testing.T) {
	type field struct {
		lo, hi int64
	}
	draw := func(rt *rapid.T, name string, f field) (int64, bool) {
		vs := []int64{f.lo - 1, f.lo, f.lo + (f.hi-f.lo)/2, f.hi, f.hi + 1}
		k := rapid.IntRange(0, len(vs)-1).Draw(rt, name)
		return vs[k], k > 0 && k < len(vs)-1
	}
	rapid.Check(t, func(rt *rapid.T) {
		ok := true
		val := func(name string, f field) int64 {
			v, in := draw(rt, name, f)
			ok = ok && in
			return v
		}
		o := Options{
			MaxLoadedModels:         int(val("max_loaded", field{0, MaxLoadedLimit})),
			MemoryBudgetMB:          val("budget", field{0, MaxMemoryMB}),
			IdleTimeout:             val("idle", field{0, MaxTimeout}),
			DefaultAdmissionTimeout: val("default_timeout", field{0, MaxTimeout}),
			AdmissionCeiling:        val("ceiling", field{0, MaxTimeout}),
			LoadBackoff:             val("backoff", field{0, MaxTimeout}),
			LoadBackoffMax:          val("backoff_max", field{0, MaxTimeout}),
		}
		if _, err := New(o); (err == nil) != ok {
			rt.Fatalf("New(%+v): %v, want valid %v", o, err, ok)
		}
		ok = true
		c := Config{Engine: "fx", Options: "{}",
			Slots:            int(val("slots", field{1, MaxSlots})),
			AdmissionTimeout: val("timeout", field{NoTimeout, MaxTimeout}),
			MaxQueue:         int(val("max_queue", field{0, MaxQueueLimit})),
			MemoryMB:         val("memory", field{0, MaxMemoryMB}),
		}
		bv, in := draw(rt, "base_version", field{0, MaxBaseVersion})
		if bv >= 0 { // one below 0 has no uint64: 0 is the lower edge twice
			c.BaseVersion = uint64(bv)
			ok = ok && (in || bv == 0)
		} else {
			c.BaseVersion = 0
		}
		if err := c.Validate(); (err == nil) != ok {
			rt.Fatalf("Validate(%+v): %v, want valid %v", c, err, ok)
		}
	})
}
