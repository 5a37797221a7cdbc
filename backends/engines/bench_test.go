package engines

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEngines measures requests per second for every checkpoint at 1,
// 2 and 4 slots with as many concurrent clients as slots (`make
// bench-engines`). Each iteration is one request; the standard inputs are
// served in turn (for ASR the spoken commands only: the 11 s jfk.wav would
// dominate the clock). The 1->2 ratio of req/s is the parallel scaling.
func BenchmarkEngines(b *testing.B) {
	cat, reg := scan(b)
	in := standardInputs(b)
	ctx := context.Background()
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		reqs := in[cp.Task]
		if cp.Task == "asr" {
			reqs = reqs[:len(Commands)]
		}
		for _, n := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/slots=%d", name, n), func(b *testing.B) {
				if n > cp.Parallel.MaxSlots {
					b.Skipf("%s admits %d slot(s)", name, cp.Parallel.MaxSlots)
				}
				pool, err := OpenPool(ctx, reg[cp.Engine], SpecFor(name, cp, n))
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close(ctx)
				jobs := make([]int, b.N)
				for i := range jobs {
					jobs[i] = i % len(reqs)
				}
				b.ResetTimer()
				cpu0 := cpuTime()
				if _, err := pool.Serve(ctx, reqs, jobs); err != nil {
					b.Fatal(err)
				}
				cpu := cpuTime() - cpu0
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
				// CPU time per request and busy cores: on a loaded machine
				// req/s is bounded by the cores this process gets, while
				// cores-busy shows whether the slots really ran in parallel.
				b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/req")
				b.ReportMetric(cpu.Seconds()/b.Elapsed().Seconds(), "cores-busy")
			})
		}
	}
}
