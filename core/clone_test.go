package core

import (
	"math/rand/v2"
	"testing"
)

// TestCloneIsIndependentAndExact replays random workloads, clones the
// machine part-way, and runs the rest of the trace on the clone: the clone
// ends where the original run ended, and the machine it was cloned from is
// untouched by anything the clone did.
func TestCloneIsIndependentAndExact(t *testing.T) {
	opts := Options{MaxLoadedModels: 2, DefaultAdmissionTimeout: 5000, IdleTimeout: 20000, SerializeColdLoads: true}
	for seed := uint64(1); seed <= 40; seed++ {
		w, err := runWorkload(randChooser{rand.New(rand.NewPCG(seed, 7))}, opts, 300)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		evs := make([]Event, 0, len(w.records))
		for _, r := range w.records {
			if r.Ev == "" {
				continue
			}
			ev, err := r.Event()
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		cut := int(seed*7) % len(evs)
		m, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs[:cut] {
			if _, err := m.Step(ev); err != nil {
				t.Fatal(err)
			}
			m.Advance()
		}
		before, desc := string(m.AppendKey(nil)), m.Describe()
		c := m.Clone()
		for _, ev := range evs[cut:] {
			if _, err := c.Step(ev); err != nil {
				t.Fatalf("seed %d: clone: %v", seed, err)
			}
			if err := c.CheckInvariants(); err != nil {
				t.Fatalf("seed %d: clone: %v", seed, err)
			}
			c.Advance()
		}
		if string(m.AppendKey(nil)) != before || m.Describe() != desc {
			t.Fatalf("seed %d: running the clone changed the original", seed)
		}
		if got, want := c.Describe(), w.m.Describe(); got != want || string(c.AppendKey(nil)) != string(w.m.AppendKey(nil)) {
			t.Fatalf("seed %d: clone diverged from the run:\n%s\nvs\n%s", seed, got, want)
		}
	}
}
