// Package linmodel is the sequential model of the scheduler contract that
// porcupine checks concurrent histories against, shared by the live-runtime
// check (core/runtime's TestLinearizable) and the HTTP check (conformance's
// RunLin): one model, the config tables both draw, and the recording of a
// history.
//
// A history runs on three models (indexes 0..2, written a, b, c) and an ID
// that is never registered (index Models, written z). Each operation takes
// effect at one instant, as if alone:
//
//   - an inference on a registered model binds the committed config version
//     of that instant and runs on a slot below that config's slot count; on
//     an unloaded model it first loads the committed config, which fails
//     exactly as the fixture options say (fail_load, fail_clone_at below the
//     slot count, capacity below the slot count);
//   - apply (register/reconfigure, PUT over HTTP) follows the contract's
//     decision tree (validate, reuse live capacity or probe, retire, commit,
//     load), so a failure before the commit keeps everything and a failure
//     after it leaves the new version unloaded;
//   - unload and each member of a bulk unload clear residency; a bulk's
//     members are separate operations within the bulk's interval (the bulk
//     is not an atomic all-model unload, CONTRACT.md order.bulk-and-single);
//   - status is one atomic snapshot of all models: the registered IDs in
//     registration order, each with its committed version and that
//     version's slot count (and memory, where the target shows it), never a
//     partial mix; the status a manager returned is a one-model read inside
//     the manager's interval;
//   - server_busy (admission timeout, full queue, overdue blockers,
//     residency) changes nothing; an operation whose caller went away has an
//     unknown outcome and may have taken any of its effects, or none, at any
//     time after its call (porcupine's treatment of timed-out calls).
//
// What the two targets show differently is a field of Spec, not a second
// model: Spec.Memory (the runtime's status carries each version's memory,
// the HTTP model object does not) and Spec.BusyRegister (a server whose
// residency limits the checker does not know may refuse a registering PUT
// with server_busy).
//
// Threading rule: Spec, its Model and the functions of this package are pure
// and safe for concurrent use; a History is safe for concurrent use by the
// clients of its one history (Add and Now take its lock or an atomic), and
// is checked once all of them are done.
package linmodel
