package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/sim"
)

// tolerance is the target: predicted within 20% of measured.
const tolerance = 0.20

// floor is the absolute difference under which two waits count as equal
// whatever their ratio: a wait of a few hundred microseconds is the
// server's own overhead (HTTP, goroutine wake-up on a loaded machine),
// which the simulator does not model, and its ratio means nothing.
const floor = 2 * time.Millisecond

// pct is the p-th percentile of sorted by the simulator's rule
// (sim.ReplayModel: the element at (n-1)*p/100).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// clientFigures are one model's client-side figures of a run.
type clientFigures struct {
	n, ok, busy, other int
	// waitP50, waitP99: latency less the fixture's infer_ms (the service
	// time), of the answered requests: the client's estimate of the wait.
	waitP50, waitP99 time.Duration
	latP50, latP99   time.Duration
}

func clientSide(outs []outcome) map[string]clientFigures {
	lat := map[string][]time.Duration{}
	res := map[string]clientFigures{}
	for _, o := range outs {
		f := res[o.model]
		f.n++
		switch o.status {
		case 200:
			f.ok++
			lat[o.model] = append(lat[o.model], o.latency)
		case 503:
			f.busy++
		default:
			f.other++
		}
		res[o.model] = f
	}
	for id, ls := range lat {
		slices.Sort(ls)
		svc := time.Duration(modelByID(id).InferMS) * time.Millisecond
		waits := make([]time.Duration, len(ls))
		for i, l := range ls {
			waits[i] = max(l-svc, 0)
		}
		f := res[id]
		f.latP50, f.latP99 = pct(ls, 50), pct(ls, 99)
		f.waitP50, f.waitP99 = pct(waits, 50), pct(waits, 99)
		if modelByID(id).Real != nil { // no fixed service time to take off
			f.waitP50, f.waitP99 = -1, -1
		}
		res[id] = f
	}
	return res
}

// ratio is predicted over measured, with a verdict against the target.
func ratio(pred, meas time.Duration) string {
	d := pred - meas
	if d < 0 {
		d = -d
	}
	ok := d <= floor
	r := "  -  "
	if meas > 0 {
		x := float64(pred) / float64(meas)
		r = fmt.Sprintf("%5.2f", x)
		ok = ok || (x >= 1-tolerance && x <= 1+tolerance)
	}
	if ok {
		return r + " ok"
	}
	return r + " !!"
}

// writeTable prints predicted against measured waits per model: measured
// from the run's own trace (submission to grant, the simulator's own
// definition, read by the exact replay), then the client's view.
// svcMeas and svcPred are the service times (grant to release) of the
// run's trace and of the trace the prediction replayed.
func writeTable(w io.Writer, pred, meas []sim.ReplayModel, client map[string]clientFigures, svcMeas, svcPred map[string][]time.Duration) {
	fmt.Fprintf(w, "%-6s %5s %7s | %9s %9s %-8s | %9s %9s %-8s | %5s | %9s %9s %9s %9s | %9s %9s %9s %9s\n",
		"model", "reqs", "503", "meas p50", "pred p50", "ratio", "meas p99", "pred p99", "ratio",
		"loads", "m.svc50", "p.svc50", "m.svc99", "p.svc99", "cli w50", "cli w99", "cli l50", "cli l99")
	byID := func(ms []sim.ReplayModel, id string) sim.ReplayModel {
		for _, m := range ms {
			if m.Model == id {
				return m
			}
		}
		return sim.ReplayModel{Model: id}
	}
	for _, mm := range models {
		m, p, c := byID(meas, mm.ID), byID(pred, mm.ID), client[mm.ID]
		fmt.Fprintf(w, "%-6s %5d %7s | %9s %9s %-8s | %9s %9s %-8s | %5s | %9s %9s %9s %9s | %9s %9s %9s %9s\n",
			mm.ID, m.Requests, fmt.Sprintf("%d/%d", m.Busy, p.Busy),
			ms(m.WaitP50), ms(p.WaitP50), ratio(p.WaitP50, m.WaitP50),
			ms(m.WaitP99), ms(p.WaitP99), ratio(p.WaitP99, m.WaitP99),
			fmt.Sprintf("%d/%d", m.Loads, p.Loads), ms(pct(svcMeas[mm.ID], 50)), ms(pct(svcPred[mm.ID], 50)),
			ms(pct(svcMeas[mm.ID], 99)), ms(pct(svcPred[mm.ID], 99)),
			ms(c.waitP50), ms(c.waitP99), ms(c.latP50), ms(c.latP99))
	}
}

func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
