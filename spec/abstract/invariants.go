package abstract

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluice-dev/sluice/core"
)

// Invariant is one named state predicate of the spec; the names are those of
// Scheduler.tla and of core.Invariants.
type Invariant struct {
	Name  string
	Check func(s *State, p *Params) error
}

var invariants = [...]Invariant{
	{"CapacityBounds", CapacityBounds},
	{"ManagerExclusivity", ManagerExclusivity},
	{"NoBarging", NoBarging},
	{"FIFOAdmission", FIFOAdmission},
	{"NoPartialPool", NoPartialPool},
	{"MetadataConsistent", MetadataConsistent},
	{"ResidencyLimit", ResidencyLimit},
	{"LedgerBounds", LedgerBounds},
	{"EvictOnlyIdle", EvictOnlyIdle},
	{"LeaseConservation", LeaseConservation},
	{"QueueProgress", QueueProgress},
	{"TombstoneEmpty", TombstoneEmpty},
}

// Invariants lists the spec's invariants in core's order. It returns a
// copy: the list itself cannot be changed.
func Invariants() []Invariant { return append([]Invariant(nil), invariants[:]...) }

// NumInvariants is len(Invariants()), without the copy.
const NumInvariants = len(invariants)

// InvariantNames lists the invariant names in order.
func InvariantNames() []string {
	out := make([]string, len(invariants))
	for k, inv := range invariants {
		out[k] = inv.Name
	}
	return out
}

// ActionNames lists the event actions in core's order.
func ActionNames() []string {
	return []string{"SubmitRequest", "SubmitManager", "SubmitBulkUnload", "Cancel", "Release", "LoadDone",
		"CloneDone", "ProbeDone", "TeardownDone", "Tick", "BeginShutdown"}
}

// InternalActionNames lists the internal (settling) actions, which no trace logs.
func InternalActionNames() []string {
	return []string{"Pump", "LoaderStep", "ShutdownRetire", "CompleteShutdown"}
}

// CheckInvariants checks every invariant on a quiescent state and returns
// the violations joined, each a *core.InvariantError.
func CheckInvariants(s *State, p *Params) error {
	var errs []error
	for _, inv := range invariants {
		if err := inv.Check(s, p); err != nil {
			errs = append(errs, &core.InvariantError{Name: inv.Name, Detail: err.Error()})
		}
	}
	return errors.Join(errs...)
}

// CheckStateInvariants checks the invariants that read only the state, not
// its last step (all but EvictOnlyIdle): a model checker may check them
// once per distinct state instead of on every transition into it.
func CheckStateInvariants(s *State, p *Params) error {
	var errs []error
	for _, inv := range invariants {
		if inv.Name == "EvictOnlyIdle" {
			continue
		}
		if err := inv.Check(s, p); err != nil {
			errs = append(errs, &core.InvariantError{Name: inv.Name, Detail: err.Error()})
		}
	}
	return errors.Join(errs...)
}

// CheckStepInvariants checks the invariants that read the last step
// (EvictOnlyIdle: what it evicted), which hold per transition.
func CheckStepInvariants(s *State, p *Params) error {
	if err := EvictOnlyIdle(s, p); err != nil {
		return &core.InvariantError{Name: "EvictOnlyIdle", Detail: err.Error()}
	}
	return nil
}

// CapacityBounds: slot counts are 1..16, admitted requests never exceed the
// configured slots, a published pool never exceeds its capacity.
func CapacityBounds(s *State, _ *Params) error {
	for i := range s.Models {
		md := &s.Models[i]
		switch {
		case md.Cfg.Slots < 1 || md.Cfg.Slots > core.MaxSlots:
			return fmt.Errorf("%s: slots=%d", md.ID, md.Cfg.Slots)
		case md.Active() > md.Cfg.Slots:
			return fmt.Errorf("%s: active=%d slots=%d", md.ID, md.Active(), md.Cfg.Slots)
		case md.Published && md.Capacity < md.Sessions:
			return fmt.Errorf("%s: %d sessions on capacity %d", md.ID, md.Sessions, md.Capacity)
		}
	}
	return nil
}

// ManagerExclusivity: a granted manager owns its model alone, and requests
// hold slots only of a ready or loading model.
func ManagerExclusivity(s *State, _ *Params) error {
	for i := range s.Models {
		md := &s.Models[i]
		if md.HasMgr && md.Active() != 0 {
			return fmt.Errorf("%s: manager %s granted with %d active requests", md.ID, md.Mgr.Op, md.Active())
		}
		if md.Active() > 0 && md.Life != core.Ready && md.Life != core.Loading {
			return fmt.Errorf("%s: %d active requests in state %s", md.ID, md.Active(), md.Life)
		}
	}
	return nil
}

// NoBarging: no admitted request arrived after a manager still waiting in
// the FIFO.
func NoBarging(s *State, _ *Params) error {
	for i := range s.Models {
		md := &s.Models[i]
		for _, q := range md.Queue {
			if q.Kind == KReq {
				continue
			}
			for _, h := range md.Holders {
				if h.Seq > q.Seq {
					return fmt.Errorf("%s: request #%d admitted past waiting manager #%d", md.ID, h.Seq, q.Seq)
				}
			}
		}
	}
	return nil
}

// FIFOAdmission: the FIFO is in arrival order and every admitted request
// arrived before every request still queued.
func FIFOAdmission(s *State, _ *Params) error {
	for i := range s.Models {
		md := &s.Models[i]
		var last uint64
		for _, q := range md.Queue {
			if q.Seq <= last {
				return fmt.Errorf("%s: queue out of arrival order", md.ID)
			}
			last = q.Seq
			if q.Kind != KReq {
				continue
			}
			for _, h := range md.Holders {
				if h.Seq > q.Seq {
					return fmt.Errorf("%s: request #%d admitted before earlier #%d", md.ID, h.Seq, q.Seq)
				}
			}
		}
	}
	return nil
}

// NoPartialPool: only a complete pool is published; a ready model has one;
// only a ready or (probing) reconfiguring model keeps one; running requests
// run on it.
func NoPartialPool(s *State, _ *Params) error {
	for i := range s.Models {
		md := &s.Models[i]
		if (md.Life == core.Ready && !md.Published) ||
			(md.Published && md.Life != core.Ready && md.Life != core.Reconfiguring) {
			return fmt.Errorf("%s: published=%v in state %s", md.ID, md.Published, md.Life)
		}
		if md.Published && (md.Sessions != md.Cfg.Slots || md.Built != md.Sessions) {
			return fmt.Errorf("%s: published %d of %d sessions", md.ID, md.Sessions, md.Cfg.Slots)
		}
		if !md.Published && md.Sessions != 0 {
			return fmt.Errorf("%s: %d sessions without a published pool", md.ID, md.Sessions)
		}
		if md.Built > md.Cfg.Slots {
			return fmt.Errorf("%s: built %d sessions for %d slots", md.ID, md.Built, md.Cfg.Slots)
		}
		if md.Active()-md.WaitInit() > 0 && !md.Published {
			return fmt.Errorf("%s: %d running requests without a pool", md.ID, md.Active()-md.WaitInit())
		}
	}
	return nil
}

// MetadataConsistent: the published pool was built from the committed config
// and every running request is bound to it: never a partial mix.
func MetadataConsistent(s *State, _ *Params) error {
	for i := range s.Models {
		md := &s.Models[i]
		if md.Published && md.PoolVer != md.Ver {
			return fmt.Errorf("%s: pool v%d serves committed v%d", md.ID, md.PoolVer, md.Ver)
		}
		for _, h := range md.Holders {
			if !h.Wait && h.Ver != md.Ver {
				return fmt.Errorf("%s: request bound to v%d, committed v%d", md.ID, h.Ver, md.Ver)
			}
		}
	}
	return nil
}

// ResidencyLimit: a model is resident exactly while it has sessions
// (building, serving or tearing down), and the limits hold.
func ResidencyLimit(s *State, p *Params) error {
	count, used := 0, int64(0)
	for i := range s.Models {
		md := &s.Models[i]
		hasPool := md.Published || md.Job == JLoad || md.Job == JClone || md.Job == JTeardown
		if md.Resident != hasPool {
			return fmt.Errorf("%s: resident=%v with published=%v job=%s", md.ID, md.Resident, md.Published, md.Job)
		}
		if md.Resident {
			count++
			used += md.ResMB
		}
	}
	if p.Loose {
		return nil
	}
	if n := p.MaxLoaded; n > 0 && count > n {
		return fmt.Errorf("%d resident models, limit %d", count, n)
	}
	if b := p.MemoryBudgetMB; b > 0 && used > b {
		return fmt.Errorf("%dMB resident, budget %dMB", used, b)
	}
	return nil
}

// LedgerBounds: every resident pool charges 0..core.MaxMemoryMB, a model
// that is not resident charges nothing, and the checked sum of the charges
// stays within the budget (CONTRACT.md res.ledger-bounds).
func LedgerBounds(s *State, p *Params) error {
	used := int64(0)
	for i := range s.Models {
		md := &s.Models[i]
		if !md.Resident {
			if md.ResMB != 0 {
				return fmt.Errorf("%s: not resident but charges %dMB", md.ID, md.ResMB)
			}
			continue
		}
		if md.ResMB < 0 || md.ResMB > core.MaxMemoryMB || md.ResMB > math.MaxInt64-used {
			return fmt.Errorf("%s: charges %dMB on a ledger of %dMB", md.ID, md.ResMB, used)
		}
		used += md.ResMB
	}
	if b := p.MemoryBudgetMB; b > 0 && !p.Loose && used > b {
		return fmt.Errorf("%dMB resident, budget %dMB", used, b)
	}
	return nil
}

// EvictOnlyIdle: eviction and idle retirement in the last step took only
// published models with no lease, no queue and no manager.
func EvictOnlyIdle(s *State, _ *Params) error {
	for _, e := range s.Evicted {
		if e.Active != 0 || e.Queued != 0 || e.HadManager || !e.WasPublish {
			return fmt.Errorf("%s retired with active=%d queued=%d manager=%v published=%v",
				s.Models[e.Model].ID, e.Active, e.Queued, e.HadManager, e.WasPublish)
		}
	}
	return nil
}

// LeaseConservation: every live ticket is in exactly one place, requests
// waiting for a pool have one being built, and every bulk parent has a
// member left (and every member a parent).
func LeaseConservation(s *State, _ *Params) error {
	ids := map[uint64]bool{}
	dup := func(id uint64) bool {
		if id == 0 {
			return false
		}
		d := ids[id]
		ids[id] = true
		return d
	}
	members := map[uint64]int{}
	for i := range s.Models {
		md := &s.Models[i]
		for _, h := range md.Holders {
			if dup(h.ID) {
				return fmt.Errorf("%s: ticket %d in two places", md.ID, h.ID)
			}
		}
		for _, e := range md.Queue {
			if e.Kind == KMember {
				members[e.Bulk]++
			} else if dup(e.ID) {
				return fmt.Errorf("%s: ticket %d in two places", md.ID, e.ID)
			}
		}
		if md.HasMgr {
			if md.Mgr.Kind == KMember {
				members[md.Mgr.Bulk]++
			} else if dup(md.Mgr.ID) {
				return fmt.Errorf("%s: ticket %d in two places", md.ID, md.Mgr.ID)
			}
		}
		if md.WaitInit() > 0 && md.Job != JLoad && md.Job != JClone && !s.InLoaders(i) {
			return fmt.Errorf("%s: %d requests wait for a pool nobody builds", md.ID, md.WaitInit())
		}
		if !md.HasMgr && md.Step != SNone {
			return fmt.Errorf("%s: manager step %s without a manager", md.ID, md.Step)
		}
	}
	for _, b := range s.Bulks {
		if members[b.ID] == 0 {
			return fmt.Errorf("bulk %d waits with no member left", b.ID)
		}
		delete(members, b.ID)
	}
	for id := range members {
		return fmt.Errorf("bulk member of finished bulk %d", id)
	}
	return nil
}

// QueueProgress: the scheduler is work-conserving: no FIFO head that the
// contract would admit or grant waits, and the loader head does not wait for
// residency that is free.
func QueueProgress(s *State, p *Params) error {
	r := &run{s: s, p: p}
	for i := range s.Models {
		if r.pumpEnabled(i) {
			return fmt.Errorf("%s: the head of the queue could move", s.Models[i].ID)
		}
	}
	if p.Loose || len(s.Loaders) == 0 || (p.SerializeColdLoads && s.Loads() > 0) {
		return nil
	}
	h := s.Loaders[0]
	if r.fits(s.Models[h].Cfg.MemoryMB, false, nil) {
		return fmt.Errorf("%s: waits for residency that is free", s.Models[h].ID)
	}
	return nil
}

// TombstoneEmpty: an unregistered entry holds nothing, so no ticket, lease,
// job, pool or residency charge points at it (CONTRACT.md unreg.tombstone).
func TombstoneEmpty(s *State, _ *Params) error {
	for i := range s.Models {
		md := &s.Models[i]
		if !md.Gone {
			continue
		}
		if md.Life != core.Unloaded || md.Published || len(md.Holders) > 0 || len(md.Queue) > 0 || md.HasMgr ||
			md.Job != JNone || md.Resident || md.ResMB != 0 || s.InLoaders(i) || md.Step != SNone {
			return fmt.Errorf("%s: tombstone holds life=%s published=%v holders=%d queued=%d manager=%v job=%s resident=%v",
				md.ID, md.Life, md.Published, len(md.Holders), len(md.Queue), md.HasMgr, md.Job, md.Resident)
		}
	}
	return nil
}
