package abstract

import "slices"

// SameKey reports, without encoding them, that s and o have the same
// canonical key (AppendKey(b, false)). It is conservative: true means the
// keys are equal; false means they may differ, and a caller that needs the
// exact answer compares the keys. It is stricter than the key where that
// keeps it simple (admitted requests and loaders in the same order, configs
// by intern number), and exact on what the model checker's refinement
// check compares most: a core step against the one outcome the spec allows.
func SameKey(s, o *State) bool {
	if len(s.Models) != len(o.Models) || s.Shutdown != o.Shutdown || s.ShutdownSent != o.ShutdownSent ||
		len(s.Bulks) != len(o.Bulks) || !slices.Equal(s.Loaders, o.Loaders) {
		return false
	}
	for k := range s.Bulks {
		if s.Bulks[k].Reason != o.Bulks[k].Reason {
			return false
		}
	}
	for i := range s.Models {
		if !s.sameModelKey(o, i) {
			return false
		}
	}
	return true
}

// sameModelKey compares what appendModelKey encodes of model i (its loader
// position is compared by SameKey, with the whole loader queue).
func (s *State) sameModelKey(o *State, i int) bool {
	a, b := &s.Models[i], &o.Models[i]
	if a.Life != b.Life || a.Cfg.id != b.Cfg.id || a.Published != b.Published || a.Sessions != b.Sessions ||
		a.Capacity != b.Capacity || a.Built != b.Built || a.Step != b.Step || a.FailCode != b.FailCode ||
		a.Job != b.Job || a.Resident != b.Resident || a.Backoff != b.Backoff || a.Gone != b.Gone ||
		a.Ver != b.Ver || a.PoolVer != b.PoolVer || a.ResMB != b.ResMB || a.HasMgr != b.HasMgr ||
		len(a.Holders) != len(b.Holders) || len(a.Queue) != len(b.Queue) {
		return false
	}
	if a.Job == JTeardown && a.Cause != b.Cause {
		return false
	}
	if a.Published && s.lruRank(i) != o.lruRank(i) {
		return false
	}
	if a.HasMgr && !s.sameEntry(o, &a.Mgr, &b.Mgr) {
		return false
	}
	for k := range a.Holders {
		x, y := &a.Holders[k], &b.Holders[k]
		if x.Wait != y.Wait || x.Ver != y.Ver || queueRank(a, x.Seq) != queueRank(b, y.Seq) {
			return false
		}
	}
	for k := range a.Queue {
		if !s.sameEntry(o, &a.Queue[k], &b.Queue[k]) {
			return false
		}
	}
	return true
}

// lruRank is the eviction rank appendModelKey encodes for a published model.
func (s *State) lruRank(i int) int {
	n := 0
	for x := range s.Models {
		if s.Models[x].Published && s.Models[x].LastUse < s.Models[i].LastUse {
			n++
		}
	}
	return n
}

// queueRank is an admitted request's arrival rank among md's queued tickets.
func queueRank(md *Model, seq uint64) int {
	n := 0
	for k := range md.Queue {
		if md.Queue[k].Seq < seq {
			n++
		}
	}
	return n
}

func (s *State) sameEntry(o *State, x, y *Entry) bool {
	if x.Kind != y.Kind || x.Op != y.Op || x.Bounded != y.Bounded || (x.Cfg == nil) != (y.Cfg == nil) ||
		(x.Cfg != nil && x.Cfg.id != y.Cfg.id) {
		return false
	}
	return x.Kind != KMember || s.bulkRank(x.Bulk) == o.bulkRank(y.Bulk)
}

// SameEffects reports, without encoding them, that two lists of effects
// have the same AppendEffectsKey. Conservative like SameKey: it compares
// them in order, while the key is of the multiset.
func SameEffects(x, y []Effect) bool {
	if len(x) != len(y) {
		return false
	}
	for k := range x {
		a, b := &x[k], &y[k]
		if a.Kind != b.Kind || a.Code != b.Code || a.Cause != b.Cause || a.Index != b.Index ||
			a.Sessions != b.Sessions || a.Ticket != b.Ticket || a.Model != b.Model || a.Ver != b.Ver ||
			(a.Cfg == nil) != (b.Cfg == nil) || (a.Cfg != nil && a.Cfg.id != b.Cfg.id) ||
			(a.Bulk == nil) != (b.Bulk == nil) {
			return false
		}
		if a.Bulk != nil && (!slices.Equal(a.Bulk.Unloaded, b.Bulk.Unloaded) ||
			!slices.Equal(a.Bulk.NotFound, b.Bulk.NotFound)) {
			return false
		}
	}
	return true
}
