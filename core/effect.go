package core

import "fmt"

// EffectKind names an effect.
type EffectKind uint8

// The effects.
const (
	EfNone EffectKind = iota
	// EfGrant: the request Ticket may run on session Slot of Model's pool,
	// bound to config Version. The lease is held until Release.
	EfGrant
	// EfReject: Ticket ended without a lease, with Code. Terminal.
	EfReject
	// EfDone: manager or bulk Ticket finished successfully. Terminal. A bulk
	// unload's Done carries Bulk.
	EfDone
	// EfStartLoad: open the primary session of Model for Config (Version);
	// answer with LoadDone(Job).
	EfStartLoad
	// EfStartClone: clone session Index (1..Slots-1) of Model's private pool;
	// answer with CloneDone(Job).
	EfStartClone
	// EfStartProbe: privately open Config and report its parallel capacity,
	// then close it; answer with ProbeDone(Job).
	EfStartProbe
	// EfStartTeardown: destroy Sessions sessions of Model (a published pool,
	// or a private one after a failed build); answer with TeardownDone(Job).
	EfStartTeardown
	// EfShutdownComplete: after BeginShutdown, nothing is admitted, running or
	// resident any more. Emitted once.
	EfShutdownComplete
	// EfPublish: Model's private pool is complete and now serves, built from
	// config Version with Sessions sessions over an advertised Capacity.
	// Emitted inside the event that completed the pool, before the Grants
	// it enables; the shell moves its private sessions to published here.
	EfPublish
	// EfRetire: Model's published pool stops serving (Cause says why); the
	// StartTeardown of its Sessions sessions follows in the same event. The
	// shell moves its published sessions to the teardown here.
	EfRetire
)

var effectNames = [...]string{"None", "Grant", "Reject", "Done", "StartLoad", "StartClone", "StartProbe",
	"StartTeardown", "ShutdownComplete", "Publish", "Retire"}

// Observation reports whether effects of kind k only report a decision to
// the shell and its observers (Publish, Retire): the spec has no such
// actions, so the checks that compare core's effects with the spec's
// (refinement, trace validation, the simulator's oracle) leave them out.
func (k EffectKind) Observation() bool { return k == EfPublish || k == EfRetire }

// String returns the effect's name.
func (k EffectKind) String() string {
	if int(k) < len(effectNames) {
		return effectNames[k]
	}
	return fmt.Sprintf("effect(%d)", k)
}

// Effect is one thing the shell must do, as a plain value. Effects of one
// event must be carried out in order for one ticket or job, but the shell may
// run backend jobs concurrently; each job reports back as its own event.
type Effect struct {
	Kind    EffectKind
	Code    Code         // Reject
	Reason  RejectReason // Reject: why the ticket ended
	Cause   Cause        // StartTeardown, Retire: why the pool goes
	Model   Handle       // all but ShutdownComplete and bulk tickets
	Slot    int32        // Grant
	Index   int32        // StartClone
	Ticket  Ticket       // Grant, Reject, Done
	Version uint64       // Grant, StartLoad, StartClone, StartTeardown, Publish, Retire: the config version of the pool
	Job     Job          // Start*
	// Sessions is the number of sessions a StartTeardown destroys, a
	// Publish makes serve or a Retire stops.
	Sessions int32
	// Capacity is the advertised parallel capacity of a published pool
	// (Publish).
	Capacity int32
	Config   *Config     // StartLoad, StartProbe
	Bulk     *BulkResult // Done of a bulk unload
	// RetryAfter is, on a server_busy Reject refused for a load backoff, how
	// long the backoff still runs (nanoseconds, at least 1 also when its
	// end passed and no Tick forgot it yet); 0 on every other effect. The server's Retry-After comes from it (CONTRACT.md
	// fail.load-backoff).
	RetryAfter int64
	// Status is the model's status at the moment a targeted manager finished
	// (Done or Reject), before anything queued behind it starts.
	Status *ModelStatus
	// Committed is, on a targeted manager's Done or Reject, whether that
	// manager committed a config version (a registration, or a reconfigure
	// past its commit): a Reject can follow a commit (the new config's load
	// failed), and the shell records what committed whatever the answer
	// (CONTRACT.md persist.committed-only). Decided here, not by comparing
	// versions before and after, which a concurrent manager would confuse.
	Committed bool
}

// Cause says why a pool is torn down.
type Cause uint8

// The teardown causes.
const (
	CauseNone        Cause = iota
	CauseUnload            // an unload or bulk unload manager
	CauseReconfigure       // the old pool of a reconfigure
	CauseEvict             // evicted to make room for another load
	CauseIdle              // idle retirement
	CauseShutdown          // the process is shutting down
	CauseFailedLoad        // the private sessions of a failed build
)

var causeNames = [...]string{"none", "unload", "reconfigure", "evict", "idle", "shutdown", "failed_load"}

// String returns the cause's name.
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("cause(%d)", c)
}

// BulkResult is the answer of a bulk unload: the selected models that were
// registered when the bulk was submitted (deduplicated, in request order) and
// the IDs that were not.
type BulkResult struct {
	Unloaded []string
	NotFound []string
}

// RejectReason says why a Reject happened: what the event that ended the
// ticket was. The event stream shows it (GET /v1/events, rejection.reason).
type RejectReason uint8

// The reject reasons.
const (
	RejectOther      RejectReason = iota // none of the below (for example a manager's invalid capacity)
	RejectOnArrival                      // refused by its own submission: queue full, overdue, backoff, unknown, shutting down
	RejectTimeout                        // its admission deadline passed
	RejectDisconnect                     // its client went away
	RejectShutdown                       // BeginShutdown rejected it while queued
	RejectLoadFailed                     // the load, clone or probe it waited for failed
	RejectNoRoom                         // the residency ledger had no room for the load it waited for
)

var rejectNames = [...]string{"", "refused_on_arrival", "timeout", "disconnect", "shutdown", "load_failed", "no_room"}

// String returns the reason's name ("" for RejectOther).
func (r RejectReason) String() string {
	if int(r) < len(rejectNames) {
		return rejectNames[r]
	}
	return fmt.Sprintf("reject(%d)", r)
}
