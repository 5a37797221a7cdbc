// Command replayvalidate is `make replay-validate`: it checks the
// simulator's trace replay (`sluice sim --replay TRACE`, with and without
// what-if flags) against the real server.
//
//  1. It starts the built binary (`sluice serve --fixture --trace`, on
//     127.0.0.1) with three fixture models whose service times are fixed
//     (load_ms, infer_ms: the fixture sleeps them), and runs a seeded
//     open-loop workload against it: Poisson arrivals per model, bursts that
//     queue several service times of work on one slot, a reconfigure, an
//     unload and a register and delete of a fourth model.
//  2. Measured wait per model: submission to grant in the run's own trace
//     (the simulator's definition; read by the exact replay, which must
//     agree with the trace), and, beside it, the client's view: answer
//     latency, and latency less the model's infer_ms.
//  3. Predicted wait: the virtual-time what-if replay (sim.WhatIfTrace) of
//     the FIRST run's trace, with nothing changed for the first run and for
//     a second real run of the same configuration (-changes repeat), and
//     with the what-if flags of each changed configuration (slots 1->2,
//     --max-loaded-models 2, --admission-timeout 100ms), each of which is
//     then run for real with the same seeded workload.
//
// It prints, per configuration, predicted against measured p50 and p99
// wait per model with their ratio ("ok" within 20%, or within 2 ms where
// the waits are the server's own overhead), and the equivalent
// `sluice sim` commands.
//
// Size: the default (-duration 30s: the base, its repeat and three changed
// configurations) runs five servers for 30 s each, about 1,700 requests
// each: about 3 minutes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/sim"
)

// changes are the changed configurations -changes may name: each is one
// what-if flag of `sluice sim --replay`.
var changes = map[string]struct {
	setup setup
	what  func() sim.WhatIf
}{
	// repeat runs the base configuration again: the prediction from the
	// first run's trace against a second, independent real run (the base
	// run's own prediction replays the durations it measured, so it agrees
	// by construction unless the virtual-time replay decides otherwise).
	"repeat":     {setup{Name: "repeat", Slots: 1}, func() sim.WhatIf { return sim.WhatIf{} }},
	"slots2":     {setup{Name: "slots2", Slots: 2}, func() sim.WhatIf { return sim.WhatIf{Slots: 2} }},
	"maxloaded2": {setup{Name: "maxloaded2", Slots: 1, MaxLoaded: 2}, func() sim.WhatIf { n := 2; return sim.WhatIf{MaxLoadedModels: &n} }},
	"timeout100": {setup{Name: "timeout100", Slots: 1, AdmissionTimeout: 100 * time.Millisecond},
		func() sim.WhatIf { d := 100 * time.Millisecond; return sim.WhatIf{AdmissionTimeout: &d} }},
}

func main() {
	binary := flag.String("binary", "bin/sluice", "the sluice binary to validate against")
	seed := flag.Uint64("seed", 1, "workload seed")
	dur := flag.Duration("duration", 30*time.Second, "length of each run's workload")
	out := flag.String("out", "out/replay-validate", "folder of the runs' traces, configs and logs")
	only := flag.String("changes", "repeat,slots2,maxloaded2,timeout100", "configurations to predict from the base trace and run (repeat, slots2, maxloaded2, timeout100)")
	real := flag.Bool("real", false, "add a fourth model on a real engine (flite's slt voice; needs make models)")
	root := flag.String("models-root", "models", "models root of -real (make models)")
	flag.Parse()
	if *real {
		models = append(models, realModel)
	}
	modelsRoot = *root
	if err := run(*binary, *seed, *dur, *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "replayvalidate:", err)
		os.Exit(1)
	}
}

func run(binary string, seed uint64, d time.Duration, out, only string) error {
	if d < 2*time.Second {
		return fmt.Errorf("-duration must be at least 2s")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("out: %w", err)
	}
	sched := schedule(seed, d)
	fmt.Printf("replay-validate: %s, GOMAXPROCS=%d, load average %s; seed %d, %v per run: %s\n",
		time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), loadAverage(), seed, d, describe(sched))
	fmt.Printf("models (fixture, service time = infer_ms):")
	for _, m := range models {
		if m.Real != nil {
			fmt.Printf(" %s %s %s %.1f/s bursts of %d;", m.ID, m.Real["engine"], m.Real["checkpoint"], m.Rate, m.Burst)
			continue
		}
		fmt.Printf(" %s infer %d ms load %d ms %.1f/s bursts of %d;", m.ID, m.InferMS, m.LoadMS, m.Rate, m.Burst)
	}
	fmt.Print("\n\n")
	base := setup{Name: "base", Slots: 1}
	baseTrace, err := runAndReport(binary, out, sched, base, "", sim.WhatIf{})
	if err != nil {
		return err
	}
	for _, name := range strings.Split(only, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		c, ok := changes[name]
		if !ok {
			return fmt.Errorf("-changes: unknown %q (repeat, slots2, maxloaded2, timeout100)", name)
		}
		if _, err := runAndReport(binary, out, sched, c.setup, baseTrace, c.what()); err != nil {
			return err
		}
	}
	fmt.Println("meas: submission to grant in the run's own trace (exact replay, sluice sim --replay); pred: virtual-time what-if replay of the base run's trace;")
	fmt.Println("503: server_busy measured/predicted; loads: measured/predicted; m.svc, p.svc: service (grant to release) p50/p99 of the run's trace and of the replayed one;")
	fmt.Println("cli w: client latency less infer_ms (the fixture's service time); cli l: client latency.")
	fmt.Printf("ratio = pred/meas; ok within %.0f%% (or within %v: server overhead the simulator does not model).\n", tolerance*100, floor)
	return nil
}

// runAndReport runs the real server under s with the workload, then
// prints the prediction for s (the what-if w of predictFrom, the base
// trace; the run's own trace when predictFrom is empty) against what the
// run measured. It returns the run's trace.
func runAndReport(binary, out string, sched []arrival, s setup, predictFrom string, w sim.WhatIf) (string, error) {
	trace := filepath.Join(out, s.Name+".ndjson")
	_ = os.Remove(trace) // the server moves an earlier trace aside; start clean
	srv, err := startServer(binary, out, s, trace)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	outs, ops := newClient(srv.base, s.Slots).run(ctx, sched)
	took := time.Since(t0)
	if err := srv.stop(); err != nil {
		return "", err
	}
	if predictFrom == "" {
		predictFrom = trace
	}
	meas, err := sim.ReplayTraceFile(trace, core.Options{})
	if err != nil {
		return "", err
	}
	if meas.Diverged != nil {
		meas.Write(os.Stderr)
		return "", fmt.Errorf("%s: the exact replay diverged from the trace", trace)
	}
	pred, err := sim.WhatIfTraceFile(predictFrom, core.Options{}, w)
	if err != nil {
		return "", err
	}
	fmt.Printf("== %s (%s): workload took %v; trace %s (%d events, exact replay agrees)\n", s.Name, s, took.Round(time.Millisecond), trace, meas.Events)
	fmt.Printf("   predicted by: bin/sluice sim --replay %s%s\n", predictFrom, flagsOf(w))
	fmt.Printf("   measured by:  bin/sluice sim --replay %s\n", trace)
	var opsLine []string
	for _, o := range ops {
		opsLine = append(opsLine, fmt.Sprintf("%s %s %d in %v", o.op, o.model, o.status, o.latency.Round(time.Millisecond)))
	}
	fmt.Printf("   management: %s\n", strings.Join(opsLine, "; "))
	cs := clientSide(outs)
	var ok, busy, other int
	for _, f := range cs {
		ok, busy, other = ok+f.ok, busy+f.busy, other+f.other
	}
	fmt.Printf("   client: %d requests: %d answered 200, %d 503, %d other (failed or no answer)\n", len(outs), ok, busy, other)
	svcMeas, err := serviceTimes(trace)
	if err != nil {
		return "", err
	}
	svcPred, err := serviceTimes(predictFrom)
	if err != nil {
		return "", err
	}
	writeTable(os.Stdout, pred.Models, meas.Models, cs, svcMeas, svcPred)
	fmt.Println()
	return trace, nil
}

func flagsOf(w sim.WhatIf) string {
	if !w.Changed() {
		return " --slots 1 (nothing changed: the virtual-time what-if replay)"
	}
	return " " + w.String()
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
