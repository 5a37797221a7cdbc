package onnx

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// sileroPaths are the ways probabilities can run a request, selected by
// the silero test hooks: the shim's one native call per request (the
// default), the same holding the OS thread for the call (the per-window
// loop's old rationale), and the per-window loop (one native call per
// window, the live path's).
var sileroPaths = []struct {
	name             string
	perWindow, locks bool
}{
	{"shim", false, false},
	{"shim-locked", false, true},
	{"per-window", true, true},
}

// BenchmarkSileroPaths measures requests per second of the standard VAD
// inputs at 1 and 2 slots (one goroutine per slot, as
// backends/engines.Pool.Serve runs them) for each path, side by side in one
// run, and fails when a path's output differs from the first one's. Run it
// with -test.cpu 2, one process a round (-test.count would repeat each
// line in place instead of alternating them):
//
//	go test -c -o bin/onnx.test ./backends/onnx/
//	for r in 1 2 3; do ./bin/onnx.test -test.run '^$' -test.bench SileroPaths -test.benchtime 96x -test.cpu 2; done
//
// Beside req/s: CPU, system time and context switches (voluntary, vcsw,
// and involuntary, ivcsw) per request, which
// a machine shared with other work disturbs less than the throughput.
func BenchmarkSileroPaths(b *testing.B) {
	dir := checkpoint(b)
	wavs := standardVAD(b)
	reqs := make([]backends.Request, len(wavs))
	for i, w := range wavs {
		reqs[i] = backends.Request{Data: w}
	}
	ctx := context.Background()
	golden := make([]string, len(reqs))
	for _, p := range sileroPaths {
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/slots=%d", p.name, n), func(b *testing.B) {
				primary, _, err := New(Config{}).Open(ctx, spec(dir, n, ""))
				if err != nil {
					b.Fatal(err)
				}
				sessions := []backends.Session{primary}
				for i := 1; i < n; i++ {
					c, err := primary.Clone(ctx, i)
					if err != nil {
						b.Fatal(err)
					}
					sessions = append(sessions, c)
				}
				defer func() {
					for _, s := range sessions {
						s.Close(ctx)
					}
				}()
				for _, s := range sessions {
					v := s.(*session).vad
					v.perWindow, v.lockThread = p.perWindow, p.locks
				}
				queue := make(chan int, b.N)
				for i := range b.N {
					queue <- i % len(reqs)
				}
				close(queue)
				out := make([][]string, n)
				errs := make([]error, n)
				b.ResetTimer()
				ru0 := usage()
				var wg sync.WaitGroup
				for k, s := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range queue {
							o, err := s.Infer(ctx, reqs[j], nil)
							if err != nil {
								errs[k] = err
								return
							}
							out[k] = append(out[k], fmt.Sprint(j, " ", string(o.JSON)))
						}
					}()
				}
				wg.Wait()
				ru := usage().minus(ru0)
				b.StopTimer()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
				per := func(x float64) float64 { return x / float64(b.N) }
				b.ReportMetric(per(ru.cpu.Seconds()*1000), "cpu-ms/req")
				b.ReportMetric(per(ru.sys.Seconds()*1000), "sys-ms/req")
				b.ReportMetric(per(float64(ru.waits)), "vcsw/req")
				b.ReportMetric(per(float64(ru.preempts)), "ivcsw/req")
				for _, list := range out {
					for _, line := range list {
						var j int
						fmt.Sscan(line, &j)
						switch g := golden[j]; {
						case g == "":
							golden[j] = line
						case g != line:
							b.Fatalf("%s: request %d differs:\n%s\n%s", p.name, j, g, line)
						}
					}
				}
			})
		}
	}
}

// rusage is the process's CPU time (user and system), its system time
// and its context switches, from getrusage: voluntary ones (a thread
// waiting, as on a futex) and involuntary ones (a thread preempted, which
// other processes on the machine cause).
type rusage struct {
	cpu, sys        time.Duration
	waits, preempts int64
}

func usage() rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return rusage{}
	}
	return rusage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), sys: time.Duration(ru.Stime.Nano()), waits: ru.Nvcsw, preempts: ru.Nivcsw}
}

func (r rusage) minus(o rusage) rusage {
	return rusage{cpu: r.cpu - o.cpu, sys: r.sys - o.sys, waits: r.waits - o.waits, preempts: r.preempts - o.preempts}
}
