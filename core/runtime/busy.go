package runtime

import (
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// Work is one piece of work the runtime waits for: an admitted request
// holding a slot (its engine call) or a model's backend job. Busy lists
// them; the shutdown names them when its deadline passes with work that
// ignored the cancellation (CONTRACT.md time.shutdown-stuck-native).
type Work struct {
	Model string
	// Kind is "request" for an admitted request, else the job's kind:
	// "load", "probe", "clone" or "teardown".
	Kind string
	// Slot is a request's slot; -1 for a job.
	Slot int
	// Ticket is the request's ticket (0 for a job).
	Ticket uint64
	// RequestID is the request's backends.Request ID when the runtime has
	// seen it (Infer, Lease.Infer); empty otherwise.
	RequestID string
	// Running is how long the request has held its slot, or how long the
	// job has run.
	Running time.Duration
}

// reqID remembers the request ID of the ticket whose index it sits at:
// id when it was known at submission (Infer), else the lease's cell, which
// Lease.Infer fills without the runtime lock.
type reqID struct {
	tk   core.Ticket
	id   string
	cell *idCell
}

// idCell is a lease's request ID, written once the request is known
// (Lease.Infer) and read by Busy; it lives in the Lease, so noting an ID
// after admission takes neither the runtime lock nor an allocation.
type idCell struct{ v atomic.Pointer[string] }

// noteReqIDLocked remembers tk's request ID (id, or later cell's) for Busy.
// r.mu is held; it costs a store in the critical section the request takes
// anyway.
func (r *Runtime) noteReqIDLocked(tk core.Ticket, id string, cell *idCell) {
	if id == "" && cell == nil {
		return
	}
	i := int(uint32(tk))
	for len(r.reqIDs) <= i {
		r.reqIDs = append(r.reqIDs, reqID{})
	}
	r.reqIDs[i] = reqID{tk: tk, id: id, cell: cell}
}

// forgetReqIDLocked drops tk's entry when its lease ends, so the table
// holds no released Lease (and through it no closed session). r.mu is held.
func (r *Runtime) forgetReqIDLocked(tk core.Ticket) {
	if i := int(uint32(tk)); i < len(r.reqIDs) && r.reqIDs[i].tk == tk {
		r.reqIDs[i] = reqID{}
	}
}

func (r *Runtime) reqIDLocked(tk core.Ticket) string {
	i := int(uint32(tk))
	if i >= len(r.reqIDs) || r.reqIDs[i].tk != tk {
		return ""
	}
	if c := r.reqIDs[i].cell; c != nil {
		if p := c.v.Load(); p != nil {
			return *p
		}
	}
	return r.reqIDs[i].id
}

// Busy returns the work in progress now: every admitted request (from the
// core's slot table: model, slot, ticket, admission time) and every
// running backend job (the core's job of each model). The core's state is
// the source of truth; the runtime adds only request IDs and job start
// times. It is a read-only snapshot for reports, not for the hot path.
func (r *Runtime) Busy() []Work {
	t := r.clock()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := max(t, r.last)
	var out []Work
	for h := range r.m.Len() {
		v := r.m.Inspect(core.Handle(h))
		for _, tv := range v.Slots {
			out = append(out, Work{Model: v.ID, Kind: "request", Slot: tv.Slot, Ticket: uint64(tv.Ticket),
				RequestID: r.reqIDLocked(tv.Ticket), Running: time.Duration(now - tv.Since)})
		}
		if v.JobKind != "none" && v.JobKind != "" {
			w := Work{Model: v.ID, Kind: v.JobKind, Slot: -1}
			if h < len(r.models) && r.models[h].jobSince > 0 {
				w.Running = time.Duration(now - r.models[h].jobSince)
			}
			out = append(out, w)
		}
	}
	return out
}
