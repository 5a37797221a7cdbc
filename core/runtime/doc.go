// Package runtime is the live scheduler: the imperative shell around the pure
// state machine of package core. It owns the machine, the sessions of every
// pool (backends.Session values, private while a pool is built, published
// once the core publishes it), the waiters of every ticket, the goroutines
// that run backend steps, the idle-retirement timer, the trace writer and
// the shutdown sequence. It makes no scheduling decision of its own: every
// decision is a core event, and the runtime only carries out effects.
//
// Threading rule: one sync.Mutex guards the machine. Each critical section is
// one core event plus routing its effects (copied out before Advance),
// preceded by the timeouts of the queued tickets whose admission deadline
// has passed, each its own event (deadlines.go); the lock is never held
// across a wait, a backend call or I/O.
// After unlocking, the section's effects are carried out: Grant, Reject and
// Done go to the waiter's own channel (buffered, one outcome per waiter, so
// the send never blocks); StartLoad, StartClone, StartProbe and
// StartTeardown start backend steps on goroutines the runtime owns, which
// report back as LoadDone, CloneDone, ProbeDone and TeardownDone. A request
// granted inside its own submission (a warm model with a spare slot) takes
// no channel at all. Waiters select on their channel, their context (client
// gone: Cancel with ReasonDisconnect, so a queued waiter leaves at once) and
// a timer for the admission deadline the core keeps (Cancel with
// ReasonTimeout), which wakes it; the runtime also keeps those deadlines
// itself, so a late timer never lets another event grant an overdue
// ticket (deadlines.go). All Runtime methods are safe for concurrent use.
//
// Leases: Infer holds its lease until it returns, so a stream holds it until
// its last chunk was emitted or an emit failed; Acquire hands out a Lease for
// deferred responses, released exactly once by Lease.Release. Engine panics
// are recovered into CodeBackend errors and failed events, so every lease
// and every backend job ends exactly once whatever the engine does.
//
// Errors: every outcome that is not success is an *Error with a core.Code;
// the server maps codes to HTTP once. Sentinels (ErrServerBusy, ...) work
// with errors.Is.
//
// Tracing: Options.Trace receives every event (core.EventRecord, with the
// ticket a submission returned) and every effect (Machine.EffectRecord) as
// one ndjson line, in machine order; lines are built under the lock and
// written outside it. Events the core refused (for example a Cancel that
// lost the race with the ticket's end) change nothing and are not written.
// Test suites set the environment variable SLUICE_TRACE_DIR (TraceDirEnv) to
// write one trace per runtime into that directory with TraceFromEnv, for
// `make trace-check`. Subscribe gives tests the same records on a channel;
// Observe gives the server's GET /v1/events hub and metrics feed the
// scheduler's steps with status snapshots.
package runtime
