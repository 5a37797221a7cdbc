package main

import "github.com/sluice-dev/sluice/backends"

// realEngines returns the real engines `sluice serve` and `sluice run` serve
// besides the fixture (which --fixture adds; `sluice run` always has it).
//
// Hook for the real engines (issue 8): when their registry exists, return it
// here, for example `return engines.Default()`; nothing else in cmd or server
// changes. Until then Sluice serves the fixture engine only.
func realEngines() backends.Registry {
	return backends.Registry{}
}
