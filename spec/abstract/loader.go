package abstract

import (
	"cmp"
	"math"
	"slices"

	"github.com/sluice-dev/sluice/core"
)

// fits reports whether mb more megabytes and one more model fit the
// residency limits now, or once the pools already tearing down (an unload,
// an eviction, a reconfigure's old pool, a failed build) and the victims
// are gone.
func (r *run) fits(mb int64, afterRetiring bool, victims []int) bool {
	count, used := 0, int64(0)
	for i := range r.s.Models {
		md := &r.s.Models[i]
		if !md.Resident || (afterRetiring && md.Job == JTeardown) {
			continue
		}
		gone := false
		for _, v := range victims {
			gone = gone || v == i
		}
		if !gone {
			count++
			used += md.ResMB
		}
	}
	if n := r.p.MaxLoaded; n > 0 && count >= n {
		return false
	}
	// Checked: compare with what is left, never sum past an int64
	// (CONTRACT.md res.ledger-bounds).
	if mb < 0 || mb > math.MaxInt64-used {
		return false
	}
	if b := r.p.MemoryBudgetMB; b > 0 && mb > b-used {
		return false
	}
	return true
}

// LoaderStep is the internal action LoaderStep (CONTRACT res.loader-fifo,
// res.retiring-counts, res.victim-choice, res.no-victim): the head of the
// loader queue starts when the cold-load guard and the residency limits
// allow; it waits while pools tearing down will make room; otherwise idle,
// queue-free ready models are evicted, least recently used first, until it
// will fit, or, with no such victims, its load is refused server_busy.
func (r *run) LoaderStep() []*run {
	s := r.s
	if len(s.Loaders) == 0 {
		return nil
	}
	if r.p.Loose {
		// Unknown limits: start, refuse, or evict any idle victims.
		cands := r.evictionCandidates()
		out := []*run{r.forkLoader(loaderPlan{kind: lpStart}), r.forkLoader(loaderPlan{kind: lpRefuse})}
		for mask := 1; mask < 1<<len(cands); mask++ {
			var v []int
			for b, x := range cands {
				if mask&(1<<b) != 0 {
					v = append(v, x)
				}
			}
			out = append(out, r.forkLoader(loaderPlan{kind: lpEvict, victims: v}))
		}
		return out
	}
	p := r.planLoader()
	if p.kind == lpNone {
		return nil
	}
	return []*run{r.forkLoader(p)}
}

// loaderPlan is what LoaderStep does to the head of the loader queue.
type loaderPlan struct {
	kind    uint8 // lpNone (waits or nothing to do), lpStart, lpRefuse, lpEvict
	victims []int
}

const (
	lpNone = iota
	lpStart
	lpRefuse
	lpEvict
)

// evictionCandidates are the resident, evictable models other than the
// loader head.
func (r *run) evictionCandidates() []int {
	s := r.s
	h := s.Loaders[0]
	var cands []int
	for x := range s.Models {
		if x != h && s.Models[x].Resident && s.evictable(x) {
			cands = append(cands, x)
		}
	}
	return cands
}

// planLoader decides LoaderStep with known limits (not Loose).
func (r *run) planLoader() loaderPlan {
	s := r.s
	if len(s.Loaders) == 0 || (r.p.SerializeColdLoads && s.Loads() > 0) {
		return loaderPlan{}
	}
	mb := s.Models[s.Loaders[0]].Cfg.MemoryMB
	if r.fits(mb, false, nil) {
		return loaderPlan{kind: lpStart}
	}
	if r.fits(mb, true, nil) {
		return loaderPlan{}
	}
	// Victims least recently used first (CONTRACT res.victim-choice), until
	// the head will fit once they and the pools already retiring are gone.
	cands := r.evictionCandidates()
	slices.SortStableFunc(cands, func(a, b int) int { return cmp.Compare(s.Models[a].LastUse, s.Models[b].LastUse) })
	var v []int
	for _, x := range cands {
		v = append(v, x)
		if r.fits(mb, true, v) {
			return loaderPlan{kind: lpEvict, victims: v}
		}
	}
	return loaderPlan{kind: lpRefuse} // CONTRACT res.no-victim
}

func (r *run) forkLoader(p loaderPlan) *run {
	f := r.fork()
	f.doLoader(p)
	return f
}

// doLoader carries out a loader plan on r itself.
func (r *run) doLoader(p loaderPlan) {
	h := r.s.Loaders[0]
	switch p.kind {
	case lpStart:
		md := &r.s.Models[h]
		r.s.Loaders = remove(r.s.Loaders, 0)
		md.Resident, md.ResMB = true, md.Cfg.MemoryMB
		md.Built, md.Capacity = 0, 0
		md.Job = JLoad
		r.emit(Effect{Kind: core.EfStartLoad, Model: h, Ver: md.Ver, Cfg: md.Cfg})
	case lpRefuse:
		r.s.Loaders = remove(r.s.Loaders, 0)
		r.failLoad(h, core.CodeServerBusy, 0)
	case lpEvict:
		for _, x := range p.victims {
			r.retire(x, core.CauseEvict)
		}
	}
}
