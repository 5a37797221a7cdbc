package conformance_test

import (
	"github.com/sluice-dev/sluice/conformance"
	"github.com/sluice-dev/sluice/conformance/inproc"
)

// The suite's tests serve package server in process: wired here, since
// package conformance does not import server (conformance/inproc does).
func init() { conformance.SetTestBuild(inproc.Build) }
