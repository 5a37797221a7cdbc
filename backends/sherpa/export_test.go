package sherpa

// Internals the external tests (package sherpa_test) use.

// TestRoot is testRoot.
var TestRoot = testRoot

// ChildLoads returns the child processes started so far.
func ChildLoads() int64 { return prober.Runs() }
