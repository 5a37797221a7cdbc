package sim

import (
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// hist is a log-linear histogram of non-negative durations: 32 buckets per
// doubling (about 3% resolution), fixed size, so a soak keeps no samples.
type hist struct {
	n      int64
	max    int64
	counts [64 * 32]int64
}

func bucketOf(v int64) int {
	if v < 32 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 6 // v>>e is in [32, 64)
	return (e+1)*32 + int(v>>e) - 32
}

func bucketLow(b int) int64 {
	if b < 32 {
		return int64(b)
	}
	e := b/32 - 1
	return int64(b%32+32) << e
}

func (h *hist) add(v int64) {
	h.n++
	h.max = max(h.max, v)
	h.counts[bucketOf(v)]++
}

func (h *hist) merge(o *hist) {
	h.n += o.n
	h.max = max(h.max, o.max)
	for k := range h.counts {
		h.counts[k] += o.counts[k]
	}
}

// quantile returns the lower bound of the bucket holding quantile q.
func (h *hist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	want := int64(q*float64(h.n-1)) + 1
	var seen int64
	for b, c := range h.counts {
		seen += c
		if seen >= want {
			return min(bucketLow(b), h.max)
		}
	}
	return h.max
}

// mstats are one model's figures.
type mstats struct {
	lastT    int64
	running  int
	pubSlots int
	busyNs   float64 // slot-nanoseconds leased
	capNs    float64 // slot-nanoseconds of published pools
	grants   int64
	maxQueue int
	wait     hist
}

// stats are a run's figures.
type stats struct {
	requests, managers, bulks int64
	grants                    int64
	rejects                   [8]int64 // requests, by code
	mgrDone, mgrRejects       int64
	bulkDone, bulkRejects     int64
	loads, loadFails          int64
	clones, cloneFails        int64
	probes, probeFails        int64
	teardowns                 [8]int64 // by cause
	slowTeardowns             int64
	shutdownDone              int64
	wait                      hist
	models                    []mstats
	end                       int64
}

func (st *stats) init(n int) { st.models = make([]mstats, 0, n) }

func (st *stats) model(h core.Handle) *mstats {
	for int(h) >= len(st.models) {
		st.models = append(st.models, mstats{})
	}
	return &st.models[h]
}

// touch integrates model h's slot occupancy up to now and samples the
// timeline.
func (st *stats) touch(w *world, h core.Handle) {
	if int(h) >= w.m.Len() {
		return
	}
	ms := st.model(h)
	if dt := w.now - ms.lastT; dt > 0 {
		ms.busyNs += float64(ms.running) * float64(dt)
		ms.capNs += float64(ms.pubSlots) * float64(dt)
	}
	ms.lastT = w.now
	s := w.m.Status(h)
	ms.running = w.o.md[h].running
	ms.pubSlots = 0
	if s.Loaded {
		ms.pubSlots = s.Slots
	}
	ms.maxQueue = max(ms.maxQueue, s.QueuedRequests)
	if s.State == core.Ready && s.ActiveSlots == 0 && s.QueuedRequests == 0 && s.QueuedManagers == 0 {
		w.idleCand = true
	}
	if w.tl != nil {
		w.tl.sample(w.now, h, &s, ms.running)
	}
}

func (st *stats) granted(w *world, e *core.Effect) {
	i := uint32(e.Ticket)
	d := w.now - w.o.t[i].submit
	st.grants++
	st.wait.add(d)
	ms := st.model(e.Model)
	ms.grants++
	ms.wait.add(d)
}

func (st *stats) ended(w *world, e *core.Effect) {
	i := uint32(e.Ticket)
	if int(i) >= len(w.o.t) {
		return
	}
	switch w.o.t[i].kind {
	case kReq:
		if e.Kind == core.EfReject && int(e.Code) < len(st.rejects) {
			st.rejects[e.Code]++
		}
	case kMgr:
		if e.Kind == core.EfDone {
			st.mgrDone++
		} else {
			st.mgrRejects++
		}
	case kBulk:
		if e.Kind == core.EfDone {
			st.bulkDone++
		} else {
			st.bulkRejects++
		}
	}
}

func (st *stats) teardown(c core.Cause) {
	if int(c) < len(st.teardowns) {
		st.teardowns[c]++
	}
}

func (st *stats) finish(w *world) {
	st.end = w.now
	for h := range w.m.Len() {
		st.touch(w, core.Handle(h))
	}
}

// ModelSummary is one model's line of a run's summary.
type ModelSummary struct {
	ID          string
	Slots       int     // configured slots at the end
	Grants      int64   // requests granted
	Utilisation float64 // leased slot time / published slot time
	WaitP50     int64   // admission wait of granted requests, virtual ns
	WaitP99     int64
	MaxQueue    int
}

// Summary is what one run did.
type Summary struct {
	Seed        uint64
	Scenario    string
	Events      int   // core events applied
	VirtualTime int64 // virtual nanoseconds
	Requests    int64
	Admissions  int64 // requests granted
	// Rejections counts rejected requests by code name.
	Rejections         map[string]int64
	Managers, Bulks    int64
	ManagerRejections  int64
	WaitP50, WaitP99   int64
	WaitMax            int64
	Loads, LoadFails   int64
	Clones, CloneFails int64
	Probes, ProbeFails int64
	// Teardowns counts teardowns by cause name.
	Teardowns     map[string]int64
	SlowTeardowns int64
	Shutdown      bool
	Models        []ModelSummary

	wait hist
}

func (w *world) summary() Summary {
	st := &w.st
	s := Summary{Seed: w.opts.Seed, Scenario: w.sc.describe(), Events: w.steps, VirtualTime: st.end,
		Requests: st.requests, Admissions: st.grants, Managers: st.managers, Bulks: st.bulks,
		ManagerRejections: st.mgrRejects, WaitP50: st.wait.quantile(0.5), WaitP99: st.wait.quantile(0.99),
		WaitMax: st.wait.max, Loads: st.loads, LoadFails: st.loadFails, Clones: st.clones, CloneFails: st.cloneFails,
		Probes: st.probes, ProbeFails: st.probeFails, SlowTeardowns: st.slowTeardowns, Shutdown: st.shutdownDone > 0,
		Rejections: map[string]int64{}, Teardowns: map[string]int64{}, wait: st.wait}
	for c, n := range st.rejects {
		if n > 0 {
			s.Rejections[core.Code(c).String()] = n
		}
	}
	for c, n := range st.teardowns {
		if n > 0 {
			s.Teardowns[core.Cause(c).String()] = n
		}
	}
	for h := range w.m.Len() {
		ms := st.model(core.Handle(h))
		u := 0.0
		if ms.capNs > 0 {
			u = ms.busyNs / ms.capNs
		}
		s.Models = append(s.Models, ModelSummary{ID: w.m.ID(core.Handle(h)), Slots: w.m.Config(core.Handle(h)).Slots,
			Grants: ms.grants, Utilisation: u, WaitP50: ms.wait.quantile(0.5), WaitP99: ms.wait.quantile(0.99),
			MaxQueue: ms.maxQueue})
	}
	return s
}

var codeOrder = []core.Code{core.CodeServerBusy, core.CodeShuttingDown, core.CodeInvalid, core.CodeNotFound,
	core.CodeBackend, core.CodeCancelled}

var causeOrder = []core.Cause{core.CauseUnload, core.CauseReconfigure, core.CauseEvict, core.CauseIdle,
	core.CauseShutdown, core.CauseFailedLoad}

// Write prints the summary as a small report.
func (s *Summary) Write(w io.Writer) {
	fmt.Fprintf(w, "seed %d: %s\n", s.Seed, s.Scenario)
	fmt.Fprintf(w, "  events %d, virtual time %s, shutdown %v\n", s.Events, dur(s.VirtualTime), s.Shutdown)
	fmt.Fprintf(w, "  requests %d, admissions %d, rejections %s\n", s.Requests, s.Admissions, s.rejections())
	fmt.Fprintf(w, "  admission wait p50 %s, p99 %s, max %s\n", dur(s.WaitP50), dur(s.WaitP99), dur(s.WaitMax))
	fmt.Fprintf(w, "  managers %d (%d rejected), bulk unloads %d\n", s.Managers, s.ManagerRejections, s.Bulks)
	fmt.Fprintf(w, "  backend: loads %d (%d failed), clones %d (%d failed), probes %d (%d failed), slow teardowns %d\n",
		s.Loads, s.LoadFails, s.Clones, s.CloneFails, s.Probes, s.ProbeFails, s.SlowTeardowns)
	fmt.Fprintf(w, "  teardowns %s\n", s.teardowns())
	if len(s.Models) == 0 {
		return
	}
	fmt.Fprintf(w, "  %-8s %5s %8s %7s %10s %10s %8s\n", "model", "slots", "grants", "util", "wait p50", "wait p99", "maxqueue")
	for _, m := range s.Models {
		fmt.Fprintf(w, "  %-8s %5d %8d %6.1f%% %10s %10s %8d\n", m.ID, m.Slots, m.Grants, 100*m.Utilisation,
			dur(m.WaitP50), dur(m.WaitP99), m.MaxQueue)
	}
}

func (s *Summary) rejections() string {
	var parts []string
	for _, c := range codeOrder {
		if n := s.Rejections[c.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func (s *Summary) teardowns() string {
	var parts []string
	for _, c := range causeOrder {
		if n := s.Teardowns[c.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
