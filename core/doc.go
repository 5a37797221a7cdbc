// Package core is Sluice's scheduler: the behaviour contract (CONTRACT.md) as
// one pure, deterministic state machine.
//
// The machine owns every scheduling decision: per-model lifecycle, the
// per-model FIFO of requests and managers, slot leases, cold loads and the
// optional cold-load guard, reconfiguration, unload and bulk unload,
// residency limits with eviction and idle retirement, admission timeouts and
// the shutdown phase. It owns nothing else: it has no goroutines, no channels,
// no clock, no randomness, no logging and no I/O.
//
// Events go in, effects come out, in the style of etcd-io/raft's RawNode.
// Every event is one method (SubmitRequest, SubmitManager, SubmitBulkUnload,
// Cancel, Release, LoadDone, CloneDone, ProbeDone, TeardownDone, Tick,
// BeginShutdown), named exactly as the actions of spec/Scheduler.tla, and
// Step replays any of them from an Event value. Each event carries the time at
// which it happened. The effects the event caused (Grant, Reject, Done,
// StartLoad, StartClone, StartProbe, StartTeardown, ShutdownComplete, and
// the observations Publish and Retire: a pool starts or stops serving, with
// its cause) are appended to a buffer that the caller reads with Effects and
// clears with Advance before the next event. Effects are plain values, never
// callbacks; the shell acts on them and decides nothing they do not say.
//
// Threading rule: a Machine is not safe for concurrent use. The shell
// (core/runtime) guards it with one mutex and never holds that mutex across a
// wait, a backend call or I/O.
//
// Invariants live once, in CheckInvariants; the model checker, the rapid
// tests, the simulator and the conformance suite all call it.
package core
