package sim

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// benchRun runs whole simulations, seed after seed, until b.N core events
// were simulated, and reports simulated core events per second.
func benchRun(b *testing.B, base Options) {
	b.ReportAllocs()
	events := 0
	seed := uint64(1)
	start, cpu := time.Now(), cpuTime()
	for events < b.N {
		o := base
		o.Seed = seed
		o.Steps = 5000
		res, err := Run(o)
		if err != nil {
			b.Fatal(err)
		}
		if res.Failure != nil {
			b.Fatal(res.Failure)
		}
		events += res.Summary.Events
		seed++
	}
	report(b, events, start, cpu)
}

// report prints simulated core events per wall-clock second and per
// CPU-second of this process (run with -cpu 1 for "on one core").
func report(b *testing.B, events int, start time.Time, cpu time.Duration) {
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
	if c := cpuTime() - cpu; c > 0 {
		b.ReportMetric(float64(events)/c.Seconds(), "events/cpu-s")
	}
}

// BenchmarkSim is the whole simulator: workload, engines, oracle, core's
// invariants after every event, watchdog. One op is one core event.
func BenchmarkSim(b *testing.B) { benchRun(b, Options{}) }

// BenchmarkSimNoInvariants is the same without core.CheckInvariants, to
// show what the invariants cost.
func BenchmarkSimNoInvariants(b *testing.B) { benchRun(b, Options{NoInvariants: true}) }

// BenchmarkCoreOnly is the baseline: the same recorded core events applied
// to a bare machine, with no simulator, oracle or invariants.
func BenchmarkCoreOnly(b *testing.B) {
	var recs [][]recEv
	var opts []core.Options
	total := 0
	for seed := uint64(1); total < 200_000; seed++ {
		o := Options{Seed: seed, Steps: 5000, record: true}
		w, err := newWorld(&o)
		if err != nil {
			b.Fatal(err)
		}
		w.run()
		recs = append(recs, w.rec)
		opts = append(opts, w.sc.opts)
		total += len(w.rec)
	}
	b.ReportAllocs()
	b.ResetTimer()
	events := 0
	start, cpu := time.Now(), cpuTime()
	for events < b.N {
		for k, rec := range recs {
			m, _ := core.New(opts[k])
			tmap := map[core.Ticket]core.Ticket{}
			for i := range rec {
				ev := rec[i].ev
				if ev.Kind == core.EvCancel || ev.Kind == core.EvRelease {
					ev.Ticket = tmap[ev.Ticket]
				}
				tk, _, _ := apply(m, &ev)
				if rec[i].tk != 0 {
					tmap[rec[i].tk] = tk
				}
				m.Advance()
			}
			events += len(rec)
		}
	}
	report(b, events, start, cpu)
}

// BenchmarkSimLong is the soak's shape: runs of 200,000 core events, where
// queues, tickets and the event heap reach their steady state.
func BenchmarkSimLong(b *testing.B) {
	b.ReportAllocs()
	events := 0
	seed := uint64(1)
	start, cpu := time.Now(), cpuTime()
	for events < b.N {
		res, err := Run(Options{Seed: seed, Steps: 200_000})
		if err != nil || res.Failure != nil {
			b.Fatal(err, res.Failure)
		}
		events += res.Summary.Events
		seed++
	}
	report(b, events, start, cpu)
}
