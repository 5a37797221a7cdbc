// Command benchpeers is `make bench-peers`: five scheduling workloads
// over HTTP through Sluice and through stand-ins for the designs its users
// would pick instead, built here and never in the server, each over the
// same engine (backends/fixture used as a library, with deterministic
// latencies; then once more with one real engine, flite), so that only the
// scheduling differs. It prints one table: per workload figure, per design,
// the figure and its ratio to Sluice's, all from one run.
//
// The designs (each file's doc says what it imitates and what it leaves
// out):
//
//	sluice  the real server (server.New) in process, --parallel-jobs
//	serial  whisper.cpp examples/server/server.cpp: one global mutex (serial.go)
//	ollama  ollama server/sched.go: one pending queue, one scheduling loop (ollama.go)
//	swap    llama-swap's swap group: one model resident at a time (swap.go)
//
// The workloads (workloads.go): (1) a fast model's p50/p99 while a slow
// model is busy and another cold-loads; (2) short and long requests on one
// model; (3) a reconfigure under a steady stream; (4) a burst against a
// queue limit; (5) alternating requests over three models with room for
// two. With the real engine: (2) and (5) with flite's slt voice.
//
// Size: the default (-window 2s, -burst 12, -seq 100) runs in about 2
// minutes on 2 loaded cores: every design and workload once, each design
// started afresh per workload. Latencies are the fixture's (load_ms,
// infer_ms), so the figures measure scheduling, not the machine; a loaded
// machine adds noise to the real-engine rows only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/backends/flite"
)

func main() {
	sz := size{}
	flag.DurationVar(&sz.window, "window", 2*time.Second, "measuring window of workloads 1-3")
	flag.IntVar(&sz.burst, "burst", 12, "requests in the burst of workload 4")
	flag.IntVar(&sz.seq, "seq", 100, "requests in the alternating sequence of workload 5")
	real := flag.Bool("real", true, "run workloads 2 and 5 again with flite (needs make models)")
	root := flag.String("models-root", "models", "models root holding flite-slt (make models)")
	only := flag.String("designs", "", "comma-separated designs to run (default: all)")
	flag.Parse()
	if err := run(sz, *real, rootPath(*root), *only); err != nil {
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(1)
	}
}

func run(sz size, withReal bool, root, only string) error {
	if sz.window <= 0 || sz.burst < 6 || sz.seq < 4 {
		return fmt.Errorf("size too small: -window > 0, -burst >= 6, -seq >= 4")
	}
	ds := designs
	if only != "" {
		ds = nil
		for _, d := range designs {
			if d.name == "sluice" || strings.Contains(","+only+",", ","+d.name+",") {
				ds = append(ds, d)
			}
		}
	}
	var names []string
	for _, d := range ds {
		names = append(names, d.name)
	}
	t := newTable(names)
	start := time.Now()
	// The fixture's workloads, then (withReal) the same shapes on flite.
	type pass struct {
		workloads     []workload
		newEngine     func() backends.Engine
		engName, root string
	}
	passes := []pass{{fixtureWorkloads(), func() backends.Engine { return fixture.New() }, "bench-fixture", ""}}
	if withReal {
		if err := flite.Available(); err != nil {
			return fmt.Errorf("flite (make deps): %w", err)
		}
		passes = append(passes, pass{realWorkloads(), func() backends.Engine { return flite.New() }, "bench-flite", root})
	}
	wi := 0 // workloads run so far: each starts its designs one further on
	for _, p := range passes {
		for _, w := range p.workloads {
			for _, d := range rotated(ds, wi) {
				figs, err := runOne(d, w, p.newEngine, p.engName, p.root, sz)
				if err != nil {
					return fmt.Errorf("workload %s, design %s: %w", w.name, d.name, err)
				}
				t.add(d.name, figs)
			}
			wi++
		}
	}
	fmt.Printf("bench-peers: %s, GOMAXPROCS=%d, %d CPUs, load average %s; window %v, burst %d, sequence %d; %v in all\n\n",
		time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAverage(),
		sz.window, sz.burst, sz.seq, time.Since(start).Round(time.Second))
	fmt.Print(t.String())
	fmt.Println()
	fmt.Println("Ratios are the design's figure over Sluice's from this run; (+N) where Sluice's is 0; [..] counts refused (503) and failed requests, and the ticks of an open-loop stream not sent because 16 of its requests were still out. Each workload starts with the next design in turn.")
	for _, d := range ds {
		fmt.Printf("- %s: %s\n", d.name, d.about)
	}
	return nil
}

// rotated is ds starting at its k-th design (modulo its length): the
// workloads take turns at who runs first, so no design always meets the
// machine cold (with Sluice always first, flite's short-request p50 read
// 32.3 ms for Sluice against 27.9 and 24.1 for the designs after it, in
// a run where three earlier runs had them within 0.90-1.07x).
func rotated(ds []design, k int) []design {
	if len(ds) == 0 {
		return nil
	}
	k %= len(ds)
	return append(append([]design(nil), ds[k:]...), ds[:k]...)
}

// runOne starts design d afresh over a new engine, runs workload w against
// it and stops it.
func runOne(d design, w workload, newEngine func() backends.Engine, engName, root string, sz size) ([]figure, error) {
	e := w.env(env{eng: newCountingEngine(engName, newEngine()), root: root})
	url, stop, err := d.start(e)
	if err != nil {
		return nil, err
	}
	defer stop()
	c := newClient(url)
	defer c.closeIdle()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // bounds a design that hangs
	defer cancel()
	return w.run(ctx, c, e, sz)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
