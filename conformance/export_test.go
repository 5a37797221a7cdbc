package conformance

// testBuild builds the tests' in-process servers: package server's
// (conformance/inproc.Build), set by inproc_test.go before TestMain runs.
// The package itself does not import server, and its internal tests cannot
// import inproc (which imports this package).
var testBuild Builder

// SetTestBuild sets testBuild (inproc_test.go, an external test file).
func SetTestBuild(b Builder) { testBuild = b }
