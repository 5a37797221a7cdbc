// Package conformance is Sluice's conformance suite: the matrices of
// CONTRACT.md as data (matrices/*.yaml, one file per matrix, embedded), an
// interpreter of their small step language that drives any Sluice build
// through its public HTTP API and the fixture engine's gates, a runner that
// reports a verdict per case, a linearizability check of random concurrent
// HTTP workloads (porcupine), and the evidence labels of CONTRACT.md
// (`make contract` rewrites the Test and Label columns from the cases).
//
// It owns: the case format (spec.go, load.go), the interpreter (run.go,
// steps.go, steps_files.go, expect.go, client.go), the servers it starts
// itself for cases that need their own flags or stop the server
// (instance.go: in-process through package server, or a binary given with
// --binary; engines.go: the real engines such a server may serve), the
// runtime checks that drive core/runtime in process without HTTP
// (runtime_checks.go), the runner and its reports (runner.go, report.go),
// the command (main.go: `sluice conformance`), the labels (labels.go) and
// the HTTP linearizability check (lin*.go).
//
// Threading rule: a Suite is immutable after Load and shared freely. Each
// case runs on its own goroutine with its own caseRun (HTTP client, calls,
// symbol table); asynchronous calls run on goroutines owned by the caseRun,
// which joins them before the case ends. Instances are safe for concurrent
// use. The runner's results are collected under one mutex.
//
// Nothing here sleeps to reach a state: a case waits for a condition it can
// observe over HTTP (a gate's waiting count, a model's counters, an answer)
// or in its own server's files (the scheduler trace), polled with a short
// backoff and bounded by the step timeout.
package conformance
