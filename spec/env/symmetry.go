package env

import (
	"slices"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// Symmetry over interchangeable clients (see Enabled): two clients of one
// model in the same situation are interchangeable, so cancelling or
// releasing one or the other leads to states equal up to renaming the
// clients, which the canonical keys identify; only the first of them gets a
// label. The checks on the transition (ticket rules, invariants,
// refinement) are equally equivariant under that renaming.

// sameWaiter reports whether queued tickets p and e (e right behind p in
// md's queue) are interchangeable: the same kind, operation, config and
// deadline class, and no admitted request arrived between them (its rank
// among the queued tickets tells them apart).
func sameWaiter(md *abstract.Model, p, e *abstract.Entry) bool {
	if p.Kind != e.Kind || p.Op != e.Op || p.Cfg != e.Cfg || p.Bounded != e.Bounded || p.Kind == abstract.KMember {
		return false
	}
	for _, h := range md.Holders {
		if p.Seq < h.Seq && h.Seq < e.Seq {
			return false
		}
	}
	return true
}

// sameHolderBefore reports whether an earlier admitted request of md is
// interchangeable with the k-th: the same phase, bound to the same version,
// and the same rank among the queued tickets.
func sameHolderBefore(md *abstract.Model, k int) bool {
	h := &md.Holders[k]
	for x := 0; x < k; x++ {
		o := &md.Holders[x]
		if o.Wait == h.Wait && o.Ver == h.Ver && rank(md, o.Seq) == rank(md, h.Seq) {
			return true
		}
	}
	return false
}

func rank(md *abstract.Model, seq uint64) int {
	n := 0
	for _, e := range md.Queue {
		if e.Seq < seq {
			n++
		}
	}
	return n
}

// SymmetryClasses returns, for each model of the universe, its symmetry
// class: models i and j share a class when exchanging them maps the
// environment to itself (both or neither get requests, both start from the
// same config, and exchanging them maps every bulk selection to a
// selection), transitively. Symmetry reduction (Bound.Symmetry) exchanges
// models only within a class: a canonical key sorts the models of a class,
// never across classes.
func (b *Bound) SymmetryClasses() []byte {
	n := len(b.Models)
	class := make([]byte, n)
	for i := range class {
		class[i] = byte(i)
	}
	find := func(i int) int {
		for int(class[i]) != i {
			i = int(class[i])
		}
		return i
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if b.swapIsSymmetry(i, j) {
				class[find(j)] = byte(find(i))
			}
		}
	}
	for i := range class {
		class[i] = byte(find(i))
	}
	return class
}

func (b *Bound) swapIsSymmetry(i, j int) bool {
	if b.requestsTo(i) != b.requestsTo(j) || b.InitConfig(i) != b.InitConfig(j) || (i < b.Registered) != (j < b.Registered) {
		return false
	}
	swap := func(x int) int {
		switch x {
		case i:
			return j
		case j:
			return i
		}
		return x
	}
	for _, sel := range b.Selections {
		found := false
		for _, other := range b.Selections {
			if len(other) != len(sel) {
				continue
			}
			same := true
			for _, x := range sel {
				if !slices.Contains(other, swap(x)) {
					same = false
					break
				}
			}
			found = found || same
		}
		if !found {
			return false
		}
	}
	return true
}

// ClassOf returns the symmetry class of model id for canonical keys: its
// SymmetryClasses entry, or 0xff for a model outside the universe.
func (b *Bound) ClassOf(classes []byte) func(id string) byte {
	return func(id string) byte {
		for k, x := range b.Models {
			if x == id {
				return classes[k]
			}
		}
		return 0xff
	}
}

// ModelOf returns the model (an index into Models) that label l concerns
// alone in state s: a submission to it, a completion of its job, the
// release or cancellation of one of its tickets. Bulk unloads, the
// cancellation of a bulk, ticks, shutdown and a stale release concern no
// single model.
func (b *Bound) ModelOf(s *abstract.State, l Label) (int, bool) {
	switch l.Kind {
	case core.EvSubmitRequest, core.EvSubmitManager, core.EvLoadDone, core.EvCloneDone, core.EvProbeDone,
		core.EvTeardownDone:
		return int(l.Model), true
	case core.EvRelease:
		return int(l.Model), l.Ticket != 0
	case core.EvCancel:
		for _, bk := range s.Bulks {
			if bk.ID == l.Ticket {
				return 0, false
			}
		}
		return int(l.Model), true
	}
	return 0, false
}
