// Package abstract is the executable transcription of spec/Scheduler.tla: the
// scheduler contract over abstract state (sequences, bags and records, no
// optimisation), with the same action and invariant names as the TLA+ text
// and as package core.
//
// A State is one TLA+ state. Step applies one event action (SubmitRequest,
// SubmitManager, SubmitBulkUnload, Cancel, Release, LoadDone, CloneDone,
// ProbeDone, TeardownDone, Tick, BeginShutdown) and then runs the internal
// actions (Pump, LoaderStep, ShutdownRetire, CompleteShutdown) in every
// order until none is enabled, exactly as the TLA+ spec alternates an event
// with its settling steps. Step returns every quiescent outcome, each with the
// effects it emitted, so the nondeterminism the contract allows (the order of
// settling steps, eviction victims, overdue fail-fast, what a Tick expires)
// is explored rather than decided.
//
// The transcription is deliberately independent of core's data structures: it
// imports core only for the shared vocabulary (State, Op, Code, Cause, Reason,
// EffectKind, EventKind) so that abstracted core states and spec states
// compare directly.
//
// Threading rule: a State is a value; Step never mutates its argument and
// is safe to call from several goroutines on different or shared states. A
// Stepper (Step reusing its memory) belongs to one goroutine.
package abstract
