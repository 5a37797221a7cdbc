//go:build !unix

package sim

import "time"

// cpuTime is not measured on this platform.
func cpuTime() time.Duration { return 0 }
