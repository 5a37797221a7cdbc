package core

import "strings"

// Mutants is a set of planted scheduler bugs that Options.Mutants switches on.
// They exist so that every check (model checker, rapid tests, trace
// validation, simulator, conformance suite) can show that it catches real
// mistakes: a check that catches no mutant is not a check. They exist only
// in builds with the sluice_mutants tag (MutantsBuilt); elsewhere New
// refuses them and their branches are compiled out.
type Mutants uint32

// The mutants. Each is a bug that model servers have shipped.
const (
	// MutBarge: a request takes a spare slot past a waiting manager.
	MutBarge Mutants = 1 << iota
	// MutDoubleRelease: a repeated Release frees a slot a second time.
	MutDoubleRelease
	// MutPartialPool: the pool is published after the primary, before its clones.
	MutPartialPool
	// MutEvictBusy: eviction takes a ready model that is serving.
	MutEvictBusy
	// MutStaleMetadata: after a reconfigure, requests are bound to the old config version.
	MutStaleMetadata
	// MutTimeoutLeak: a timed-out waiter leaves the queue but keeps its ticket.
	MutTimeoutLeak
	// MutBulkOneByOne: a bulk unload publishes its barriers one at a time.
	MutBulkOneByOne
	// MutLostWakeup: after a failed load, the queued requests are not woken.
	MutLostWakeup
	// MutLIFO: queued requests are admitted newest first.
	MutLIFO
	// MutManagerOverlap: a manager is granted while requests still hold slots.
	MutManagerOverlap
	// MutResidencyOverflow: loads start without checking the residency limits.
	MutResidencyOverflow
	// MutRetiredIsFree: a retiring model's memory is freed before its teardown ends.
	MutRetiredIsFree

	mutEnd
)

var mutantNames = []string{"barge", "double_release", "partial_pool", "evict_busy", "stale_metadata",
	"timeout_leak", "bulk_one_by_one", "lost_wakeup", "lifo", "manager_overlap", "residency_overflow",
	"retired_is_free"}

// MutantsBuilt reports whether this build has the planted bugs (the
// sluice_mutants build tag).
func MutantsBuilt() bool { return mutantsBuilt }

// AllMutants lists every mutant, one bit each.
func AllMutants() []Mutants {
	var all []Mutants
	for x := Mutants(1); x < mutEnd; x <<= 1 {
		all = append(all, x)
	}
	return all
}

// String names the mutants in the set, joined by "+".
func (x Mutants) String() string {
	var parts []string
	for k, n := range mutantNames {
		if x&(1<<k) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// ParseMutant returns the mutant with the given name.
func ParseMutant(name string) (Mutants, bool) {
	for k, n := range mutantNames {
		if n == name {
			return 1 << k, true
		}
	}
	return 0, false
}

// pendingMembers are the bulk members MutBulkOneByOne has not published yet.
type pendingMembers struct {
	parent int32
	models []Handle
}

// nextLater publishes the next withheld member of bulk p (MutBulkOneByOne).
func (m *Machine) nextLater(p int32) {
	for k := range m.later {
		l := &m.later[k]
		if l.parent != p || len(l.models) == 0 {
			continue
		}
		h := l.models[0]
		l.models = l.models[1:]
		m.addMember(h, p, 0)
		if len(l.models) == 0 {
			m.later = append(m.later[:k], m.later[k+1:]...)
		}
		return
	}
}

// dropLater forgets withheld members of bulk p.
func (m *Machine) dropLater(p int32) {
	for k := range m.later {
		if m.later[k].parent == p {
			m.ts.t[p].pending -= int32(len(m.later[k].models))
			m.later = append(m.later[:k], m.later[k+1:]...)
			return
		}
	}
}
