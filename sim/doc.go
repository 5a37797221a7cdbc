// Package sim is Sluice's deterministic simulator: it drives the scheduler
// core (package core) with seeded workloads in virtual time, with faults at
// every backend step, and checks it after every event.
//
// The package owns the simulated world around one core.Machine: a seeded PCG
// generator (math/rand/v2), a virtual clock in int64 nanoseconds and an event
// heap; simulated engines with latency distributions and faults (load,
// probe, clone, inference, stream writes, slow or hung teardown); clients
// with admission timeouts, disconnects and bursts over several models under
// residency limits and idle retirement; management operations and
// overlapping bulk unloads; and shutdown with its drain. After every core
// event it checks core's invariants (CheckInvariants) and an independent
// oracle of client-visible properties (every ticket ends exactly once, a
// grant binds the committed version, the engine's sessions and memory match
// what core asked for, refused API misuse is refused). A liveness watchdog
// reports tickets that wait while nothing in flight can wake them, with the
// chain they wait on.
//
// A failure names its seed; Investigate re-runs the seed (any seed replays
// exactly), writes the ndjson trace in core's Record format and minimizes the
// recorded core events by delta debugging, replaying candidates through the
// core. Campaign runs many seeds, Mutants shows which of core's planted bugs
// the simulator finds, and Main is the `sluice sim` command.
//
// A recorded runtime trace replays two ways: ReplayTrace event by event,
// every effect compared with the recorded one (`sluice sim --replay`), and
// WhatIfTrace in virtual time under a changed configuration (slots,
// residency limit, memory budget, admission timeout), the clients' actions
// at their recorded times and every grant and backend job lasting as long
// as its recorded counterpart, for capacity planning.
//
// Threading rule: a world (one Run) is single-goroutine and shares nothing;
// Campaign and Mutants run independent worlds, one per seed, on parallel
// goroutines and merge their results in seed order, so output never depends
// on scheduling.
package sim
