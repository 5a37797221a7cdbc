package core

import "maps"

// Clone returns an independent deep copy of the machine: the same state,
// options, ticket table and pending effects, sharing only values core never
// mutates after creation (committed *Config, the *BulkResult and *ModelStatus
// of a finished manager). A model checker expands a state by cloning it and
// applying one event to the copy; Clone is exact, so a clone and a replay of
// the same path have the same AppendKey.
func (m *Machine) Clone() *Machine {
	c := *m
	c.models = append([]model(nil), m.models...)
	c.index = maps.Clone(m.index)
	c.ts.t = append([]ticket(nil), m.ts.t...)
	c.ts.free = append([]int32(nil), m.ts.free...)
	c.out = append(make([]Effect, 0, max(len(m.out), 8)), m.out...)
	c.loaders = append([]Handle(nil), m.loaders...)
	c.dirty = append([]Handle(nil), m.dirty...)
	c.touched = append([]Handle(nil), m.touched...)
	c.evicted = append([]evictRecord(nil), m.evicted...)
	if m.later != nil {
		c.later = make([]pendingMembers, len(m.later))
		for i, l := range m.later {
			c.later[i] = pendingMembers{parent: l.parent, models: append([]Handle(nil), l.models...)}
		}
	}
	c.scratch = nil
	return &c
}

// CopyInto makes c an exact copy of m, as Clone does, but in c's memory: c's
// slices are reused when they are large enough, so a model checker that
// applies each label to a copy of the same state allocates nothing once its
// spare machine has grown. Nothing of m is shared that Clone does not share.
func (m *Machine) CopyInto(c *Machine) {
	models, tt, free, out, loaders, dirty, touched, evicted, index := c.models, c.ts.t, c.ts.free, c.out, c.loaders, c.dirty, c.touched, c.evicted, c.index
	scratch := c.scratch
	*c = *m
	c.models = append(models[:0], m.models...)
	if index == nil {
		index = make(map[string]Handle, len(m.index))
	} else {
		clear(index)
	}
	for id, h := range m.index {
		index[id] = h
	}
	c.index = index
	c.ts.t = append(tt[:0], m.ts.t...)
	c.ts.free = append(free[:0], m.ts.free...)
	c.out = append(out[:0], m.out...)
	c.loaders = append(loaders[:0], m.loaders...)
	c.dirty = append(dirty[:0], m.dirty...)
	c.touched = append(touched[:0], m.touched...)
	c.evicted = append(evicted[:0], m.evicted...)
	c.later = nil
	if m.later != nil {
		c.later = make([]pendingMembers, len(m.later))
		for i, l := range m.later {
			c.later[i] = pendingMembers{parent: l.parent, models: append([]Handle(nil), l.models...)}
		}
	}
	c.scratch = scratch
}
