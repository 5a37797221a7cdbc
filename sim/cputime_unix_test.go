//go:build unix

package sim

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process used so far (user and system), so
// that benchmarks can report throughput per CPU-second, which a busy shared
// machine does not distort the way it distorts wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
