package coremodel

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/env"
)

func bound() *env.Bound {
	c := func(o string, slots int) *core.Config {
		return &core.Config{Task: "tts", Engine: "fx", Checkpoint: "ck", Options: o, Slots: slots, MemoryMB: 100}
	}
	return &env.Bound{Name: "t", Table: abstract.NewConfigTable(), Models: []string{"m0", "m1"}, Registered: 2,
		Configs: []*core.Config{c("{}", 2), c(`{"v":1}`, 2)}, Options: core.Options{MaxLoadedModels: 1},
		Requests: 6, AnyManagers: 2, Bulks: 1, Selections: [][]int{{0, 1}}, Cancels: 3, Failures: 3, Ticks: 1,
		Shutdown: true, StaleRelease: true, BoundedRequests: true, Capacity: 4}
}

// TestReplayIsDeterministic: replaying a random path reaches a machine with
// the same key and abstraction, so replay is a faithful Clone; along the
// way every event keeps the ticket rules and core's invariants.
func TestReplayIsDeterministic(t *testing.T) {
	b := bound()
	setups, err := b.Setups()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 30; run++ {
		d, err := Replay(b, 0, setups[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		var path []env.Label
		for step := 0; step < 40; step++ {
			ls := b.Enabled(d.Abstract(d.Views()), d.Budget, nil)
			if len(ls) == 0 {
				break
			}
			res, err := d.Apply(ls[rng.IntN(len(ls))])
			if err != nil {
				t.Fatal(err)
			}
			if res.Discipline != nil || res.Invariants != nil {
				t.Fatalf("step %d: %v %v", step, res.Discipline, res.Invariants)
			}
			path = append(path, res.Label)
		}
		again, err := Replay(b, 0, setups[0], path)
		if err != nil {
			t.Fatal(err)
		}
		k1 := d.AppendKey(nil, d.Views(), nil)
		k2 := again.AppendKey(nil, again.Views(), nil)
		a1 := d.Abstract(d.Views()).AppendExactKey(nil)
		a2 := again.Abstract(again.Views()).AppendExactKey(nil)
		if !bytes.Equal(k1, k2) || !bytes.Equal(a1, a2) {
			t.Fatalf("run %d: replay diverged", run)
		}
		if err := abstract.CheckInvariants(d.Abstract(d.Views()), b.Params()); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
}

// TestCloneMatchesReplay: a clone (core's Clone and the shell's copy)
// behaves as a replay of the same path, clones of clones too (their
// bookkeeping lives in the parent clone's arena), and changing a clone
// leaves the state it was cloned from alone.
func TestCloneMatchesReplay(t *testing.T) {
	b := bound()
	setups, _ := b.Setups()
	rng := rand.New(rand.NewPCG(3, 4))
	exact := func(x *Driver) []byte {
		vs := x.Views()
		return x.Abstract(vs).AppendExactKey(x.AppendKey(nil, vs, nil))
	}
	for run := 0; run < 40; run++ {
		d, err := Replay(b, 0, setups[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		var path []env.Label
		walk := func(x *Driver, n int) {
			for step := 0; step < n; step++ {
				ls := b.Enabled(x.Abstract(x.Views()), x.Budget, nil)
				if len(ls) == 0 {
					return
				}
				res, err := x.Apply(ls[rng.IntN(len(ls))])
				if err != nil {
					t.Fatal(err)
				}
				path = append(path, res.Label)
			}
		}
		walk(d, rng.IntN(20))
		for gen := 0; gen < 3; gen++ {
			before := exact(d)
			c := d.Clone()
			walk(c, 1+rng.IntN(8))
			if !bytes.Equal(before, exact(d)) {
				t.Fatalf("run %d, generation %d: the clone changed the original", run, gen)
			}
			r, err := Replay(b, 0, setups[0], path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(exact(c), exact(r)) {
				t.Fatalf("run %d, generation %d: clone and replay diverge", run, gen)
			}
			d = c
		}
	}
}

func BenchmarkReplayVsClone(b *testing.B) {
	bd := bound()
	setups, _ := bd.Setups()
	rng := rand.New(rand.NewPCG(5, 6))
	d, _ := Replay(bd, 0, setups[0], nil)
	var path []env.Label
	for step := 0; step < 20; step++ {
		ls := bd.Enabled(d.Abstract(d.Views()), d.Budget, nil)
		res, _ := d.Apply(ls[rng.IntN(len(ls))])
		path = append(path, res.Label)
	}
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			if _, err := Replay(bd, 0, setups[0], path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("clone", func(b *testing.B) {
		for b.Loop() {
			_ = d.Clone()
		}
	})
}

// TestInvariantSplit: CheckStep checks exactly core's EvictOnlyIdle (the
// one invariant that reads what the event retired, which Advance forgets)
// and CheckStateInvariants every other one, so that together they are
// core.CheckInvariants.
func TestInvariantSplit(t *testing.T) {
	if len(stepInvariants) != 1 || stepInvariants[0].Name != "EvictOnlyIdle" {
		t.Fatalf("step invariants %v, want EvictOnlyIdle alone", stepInvariants)
	}
	if len(stepInvariants)+len(stateInvariants) != core.NumInvariants || NumStateInvariants != core.NumInvariants-1 {
		t.Fatalf("%d + %d invariants, core has %d", len(stepInvariants), len(stateInvariants), core.NumInvariants)
	}
}
