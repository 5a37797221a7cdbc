// Package spec is Sluice's formal side: the contract as the TLA+
// specification Scheduler.tla (with MCScheduler.tla and its .cfg files for
// TLC), and the Go tooling that checks the real core against it, since TLC
// cannot be installed where Sluice is built:
//
//   - spec/abstract: the executable transcription of Scheduler.tla;
//   - spec/env: the bounded environment (clients, backends, operator);
//   - spec/coremodel: core.Machine inside that environment, with the
//     abstraction function and canonical keys;
//   - spec/mc: the breadth-first model checker;
//   - spec/check: the bounds, the refinement check and the reports
//     (go run ./spec/cmd/modelcheck);
//   - spec/trace: trace validation of ndjson core.Record traces
//     (go run ./spec/cmd/tracecheck);
//   - spec/mutants: which check catches which planted core bug
//     (go run ./spec/cmd/mutants).
//
// This package itself reads the names out of the TLA+ text (TLANames), so
// that a test keeps them identical to core's and the transcription's.
//
// Threading rule: everything here is a pure function of its inputs.
package spec
