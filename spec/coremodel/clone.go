package coremodel

import (
	"fmt"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/env"
)

// Clone returns an independent copy of the driver and its machine. The
// machine is copied by core's own (*core.Machine).Clone, an exact deep copy;
// the shell's bookkeeping is a few small slices of values (a bulk's model
// list and result, and configs, are shared: nothing changes them). The
// copy has no Effects: they are those of the label it applies next.
// TestCloneMatchesReplay compares clones with replays along random paths;
// replay (Replay, `modelcheck -replay-only`) remains the reference.
func (d *Driver) Clone() *Driver {
	c := *d
	c.M = d.M.Clone()
	c.Effects = nil // the effects of the next label, when there is one
	c.tickets = inArena(c.arena.tickets[:], d.tickets)
	c.members = inArena(c.arena.members[:], d.members)
	c.bulks = inArena(c.arena.bulks[:], d.bulks)
	c.models = inArena(c.arena.models[:], d.models)
	return &c
}

// CloneInto makes dst a copy of d as Clone does, in dst's memory (its
// machine's and its effects' too), so a checker that copies the same state
// once per label allocates nothing once dst has grown.
func (d *Driver) CloneInto(dst *Driver) {
	m, effs := dst.M, dst.Effects[:0]
	*dst = *d
	if m == nil {
		m = new(core.Machine)
	}
	d.M.CopyInto(m)
	dst.M, dst.Effects = m, effs
	dst.tickets = inArena(dst.arena.tickets[:], d.tickets)
	dst.members = inArena(dst.arena.members[:], d.members)
	dst.bulks = inArena(dst.arena.bulks[:], d.bulks)
	dst.models = inArena(dst.arena.models[:], d.models)
}

// inArena returns a copy of xs in arena when it fits, else on the heap. The
// copy has no spare capacity: an append moves it out of the arena rather
// than write past it.
func inArena[T any](arena, xs []T) []T {
	switch {
	case len(xs) == 0:
		return nil
	case len(xs) <= len(arena):
		n := copy(arena, xs)
		return arena[:n:n]
	}
	return append([]T(nil), xs...)
}

// Redo applies label l as Replay does (its core events, budget spent,
// nothing checked): the driver then is in the state l leads to.
func (d *Driver) Redo(l env.Label) error {
	for k, x := range d.Micro(l) {
		if _, err := d.apply(x, k == 0, CheckNone); err != nil {
			return fmt.Errorf("coremodel: redo %s: %w", d.B.Describe(x), err)
		}
	}
	return nil
}
