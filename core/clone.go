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
