package runtime

import (
	"time"

	"github.com/sluice-dev/sluice/core"
)

// Admission statistics: the runtime counts, under the scheduler lock and
// from the core's own effects, every request granted a slot (with its wait
// from submission to grant) and every request or targeted manager refused
// (by code). Counting here instead of from a record subscription keeps the
// admission fast path free of records (`make bench-http`).

// codes is the number of core.Code values counted.
const codes = int(core.CodeCancelled) + 1

// admissionStats are one model's counters.
type admissionStats struct {
	admissions uint64
	waitSum    int64    // nanoseconds
	buckets    []uint64 // per Options.WaitBuckets bound, then one for +Inf; not cumulative
	refusals   [codes]uint64
}

func (st *admissionStats) admit(wait int64, bounds []time.Duration) {
	st.admissions++
	st.waitSum += wait
	if bounds == nil {
		return
	}
	if st.buckets == nil {
		st.buckets = make([]uint64, len(bounds)+1)
	}
	i := 0
	for i < len(bounds) && wait > int64(bounds[i]) {
		i++
	}
	st.buckets[i]++
}

func (st *admissionStats) refuse(c core.Code) {
	if int(c) < codes {
		st.refusals[c]++
	}
}

// AdmissionStats are one model's admission counters (Runtime.AdmissionStats).
type AdmissionStats struct {
	// Model is the model ID; "" collects refusals of IDs that were never
	// registered.
	Model string
	// Admissions counts requests granted a slot.
	Admissions uint64
	// WaitSum is the total time from submission to grant of those requests.
	WaitSum time.Duration
	// WaitBuckets[i] counts admissions that waited at most
	// Options.WaitBuckets[i] (cumulative, as a Prometheus histogram).
	WaitBuckets []uint64
	// Refusals counts refused requests and targeted managers by code
	// (indexed by core.Code; zero for codes never seen).
	Refusals [codes]uint64
}

// AdmissionStats returns the counters of every registered model in
// registration order, then the refusals of unknown IDs, in one snapshot.
func (r *Runtime) AdmissionStats() []AdmissionStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]AdmissionStats, 0, len(r.models)+1)
	export := func(id string, st *admissionStats) {
		a := AdmissionStats{Model: id, Admissions: st.admissions, WaitSum: time.Duration(st.waitSum), Refusals: st.refusals}
		if r.waitBounds != nil {
			a.WaitBuckets = make([]uint64, len(r.waitBounds))
			var cum uint64
			for i := range r.waitBounds {
				if st.buckets != nil {
					cum += st.buckets[i]
				}
				a.WaitBuckets[i] = cum
			}
		}
		out = append(out, a)
	}
	for h := 0; h < r.m.Len() && h < len(r.models); h++ {
		export(r.m.ID(core.Handle(h)), &r.models[h].stats)
	}
	export("", &r.unknown)
	return out
}

// statsFor returns the counters of model h (NoModel: unknown IDs).
func (r *Runtime) statsFor(h core.Handle) *admissionStats {
	if h == core.NoModel || int(h) >= len(r.models) {
		return &r.unknown
	}
	return &r.models[h].stats
}

// countLocked counts a Grant or Reject effect routed in section s: kind
// and since are those of its ticket (since: submission time).
func (r *Runtime) countLocked(e *core.Effect, kind ticketKind, since, now int64) {
	switch {
	case e.Kind == core.EfGrant:
		r.statsFor(e.Model).admit(max(now-since, 0), r.waitBounds)
	case e.Kind == core.EfReject && (kind == kindRequest || kind == kindManager):
		r.statsFor(e.Model).refuse(e.Code)
	}
}

// countRoutedLocked counts a Grant or Reject about to be routed: the
// section's own ticket, or a registered waiter's.
func (r *Runtime) countRoutedLocked(s *sect, e *core.Effect) {
	kind, since := kindRequest, s.now // a Grant nobody waits for: a request, counted with no wait
	switch i := int(uint32(e.Ticket)); {
	case e.Ticket == s.own && !s.hasOwn:
		kind, since = s.ownKind, s.ownSince
		if since == 0 {
			since = s.now
		}
	case i < len(r.waiters) && r.waiters[i].tk == e.Ticket:
		w := r.waiters[i].w
		kind, since = w.kind, w.since
	}
	r.countLocked(e, kind, since, s.now)
}
