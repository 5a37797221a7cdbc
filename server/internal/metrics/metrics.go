// Package metrics is Sluice's Prometheus registry (GET /metrics): gauges
// of the models' states and queues read from one status snapshot per
// scrape (the autoscaling signal among them, queue.go), the runtime's
// admission counters, the load and unload histograms fed by the scheduler's
// lifecycle steps (feed.go: a consumer of the server's one runtime
// follower, server/internal/follow), the HTTP request metrics of the
// middleware (http.go), the serving edge's gauges and the build info. It
// imports nothing of package server: the server hands it functions.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// Metrics are Sluice's Prometheus metrics. Gauges of the model state are read
// from one atomic status snapshot per scrape, and the admission counters
// and wait histogram from the runtime's own counters (one snapshot per
// scrape, runtime.AdmissionStats); load and unload histograms are updated
// by the lifecycle feed (Begin and Steps, feed.go).
type Metrics struct {
	reg       *prometheus.Registry
	loads     *prometheus.HistogramVec
	loadFails *prometheus.CounterVec
	unloads   *prometheus.HistogramVec
	refusals  *prometheus.CounterVec // by error type and code: both from fixed sets
	http      *httpMetrics
	models    *modelLabels // the model label of every per-model series

	feed *feedState // the follower's goroutine only

	// watched turns on change notifications (tests): changed is closed and
	// replaced after every batch of steps applied.
	watched atomic.Bool
	wmu     sync.Mutex
	changed chan struct{}
}

// modelSeriesLimit is how many models get their own series (model="ID");
// the models seen after them share model="_other", their gauges and
// counters summed (sluice_model_state counts them per state). About 40
// series per model (gauges, the admission wait and load and unload
// histograms) would be 40,000 series at --max-models's default of 1024;
// the bound keeps a scrape near 10,000 whatever --max-models says.
const modelSeriesLimit = 256

// otherModels labels the models past modelSeriesLimit.
const otherModels = "_other"

// modelLabels hands out model labels: the first limit models it is asked
// about keep their ID, for good (models are never removed), so the set
// behind "_other" only grows and its sums stay monotone.
type modelLabels struct {
	mu    sync.Mutex
	limit int
	named map[string]struct{}
}

func (l *modelLabels) label(id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.named[id]; ok {
		return id
	}
	if len(l.named) < l.limit {
		l.named[id] = struct{}{}
		return id
	}
	return otherModels
}

// waitBuckets are the bounds of sluice_admission_wait_seconds, in seconds.
var waitBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// WaitBuckets returns the bounds of sluice_admission_wait_seconds as
// durations, for runtime.Options (the runtime counts the waits in them).
func WaitBuckets() []time.Duration {
	out := make([]time.Duration, len(waitBuckets))
	for i, b := range waitBuckets {
		out[i] = time.Duration(b * float64(time.Second))
	}
	return out
}

// New builds the registry. status and admissions are read at every scrape
// (runtime.Runtime's Status and AdmissionStats).
func New(status func() []core.ModelStatus, admissions func() []runtime.AdmissionStats) *Metrics {
	m := &Metrics{
		changed: make(chan struct{}),
		reg:     prometheus.NewRegistry(),
		models:  &modelLabels{limit: modelSeriesLimit, named: map[string]struct{}{}},
		loads: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_load_seconds", Help: "Duration of pool loads (primary and clones).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"model"}),
		loadFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_load_failures_total", Help: "Pool loads that failed or were refused by the engine.",
		}, []string{"model"}),
		unloads: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_unload_seconds", Help: "Duration of pool teardowns, by cause.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"model", "cause"}),
	}
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_refusals_total",
		Help: "Error answers that refuse a request (4xx, 503 server_busy and shutting_down), by error type and code.",
	}, []string{"type", "code"})
	m.reg.MustRegister(m.loads, m.loadFails, m.unloads, m.refusals, statusCollector{status, m.models}, admissionCollector{admissions, m.models},
		queueCollector{status, m.models}, // the autoscaling signal (metrics_queue.go)
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoCollector())
	m.http = newHTTPMetrics(m.reg)
	m.feed = newFeedState(m)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Refusal counts an error answer that refuses a request, by its error type
// and code (CONTRACT.md err.refusal-log).
func (m *Metrics) Refusal(typ, code string) {
	m.refusals.WithLabelValues(typ, code).Inc()
}

// LimitModelSeries replaces modelSeriesLimit (tests lower it); models
// already named keep their series.
func (m *Metrics) LimitModelSeries(n int) {
	m.models.mu.Lock()
	defer m.models.mu.Unlock()
	m.models.limit = n
}

// Await blocks until cond holds, re-checking after every batch of steps
// the feed applies, or until ctx ends (tests: the feed runs on the
// follower's goroutine).
func (m *Metrics) Await(ctx context.Context, cond func() bool) error {
	m.watched.Store(true)
	for {
		m.wmu.Lock()
		ch := m.changed
		m.wmu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// applied notes that a batch was applied.
func (m *Metrics) applied() {
	if !m.watched.Load() {
		return
	}
	m.wmu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.wmu.Unlock()
}

var (
	descActive = prometheus.NewDesc("sluice_active_slots", "Slots held by admitted requests.", []string{"model"}, nil)
	descQueued = prometheus.NewDesc("sluice_queued_requests", "Requests waiting in the model's FIFO.", []string{"model"}, nil)
	descQMgr   = prometheus.NewDesc("sluice_queued_managers", "Management operations waiting in the model's FIFO.", []string{"model"}, nil)
	descSlots  = prometheus.NewDesc("sluice_slots", "Configured slots.", []string{"model"}, nil)
	descState  = prometheus.NewDesc("sluice_model_state", "1 for the model's current state (model=\"_other\": how many of those models are in it).", []string{"model", "state"}, nil)
	descRes    = prometheus.NewDesc("sluice_resident_bytes", "Memory charged to the residency budget (--memory-budget).", []string{"model"}, nil)
)

// statusCollector exports per-model gauges from one status snapshot; the
// models past modelSeriesLimit are summed under model="_other".
type statusCollector struct {
	status func() []core.ModelStatus
	labels *modelLabels
}

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descQueued, descQMgr, descSlots, descState, descRes} {
		ch <- d
	}
}

// statusSums are the gauges of one label.
type statusSums struct {
	active, queued, managers, slots, resident float64
	states                                    [core.Unloading + 1]float64
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	var other statusSums
	others := false
	for _, s := range c.status() {
		sum := statusSums{active: float64(s.ActiveSlots), queued: float64(s.QueuedRequests),
			managers: float64(s.QueuedManagers), slots: float64(s.Slots), resident: float64(s.ResidentMB << 20)}
		if s.State <= core.Unloading {
			sum.states[s.State] = 1
		}
		if c.labels.label(s.ID) != otherModels {
			sum.emit(ch, s.ID)
			continue
		}
		others = true
		other.active += sum.active
		other.queued += sum.queued
		other.managers += sum.managers
		other.slots += sum.slots
		other.resident += sum.resident
		for i, v := range sum.states {
			other.states[i] += v
		}
	}
	if others {
		other.emit(ch, otherModels)
	}
}

func (v *statusSums) emit(ch chan<- prometheus.Metric, model string) {
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, v.active, model)
	ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, v.queued, model)
	ch <- prometheus.MustNewConstMetric(descQMgr, prometheus.GaugeValue, v.managers, model)
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, v.slots, model)
	ch <- prometheus.MustNewConstMetric(descRes, prometheus.GaugeValue, v.resident, model)
	for st := core.Unloaded; st <= core.Unloading; st++ {
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v.states[st], model, st.String())
	}
}

var (
	descAdmissions = prometheus.NewDesc("sluice_admissions_total", "Requests granted a slot.", []string{"model"}, nil)
	descRejections = prometheus.NewDesc("sluice_rejections_total", "Requests and managers refused, by reason.", []string{"model", "reason"}, nil)
	descWait       = prometheus.NewDesc("sluice_admission_wait_seconds", "Time from submission to grant.", []string{"model"}, nil)
)

// unknownModel labels refusals of IDs that are not registered, so that
// random IDs cannot grow the metrics without bound.
const unknownModel = "_unknown"

// admissionCollector exports the runtime's admission counters; the models
// past modelSeriesLimit are summed under model="_other".
type admissionCollector struct {
	stats  func() []runtime.AdmissionStats
	labels *modelLabels
}

func (c admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAdmissions, descRejections, descWait} {
		ch <- d
	}
}

func (c admissionCollector) Collect(ch chan<- prometheus.Metric) {
	var other runtime.AdmissionStats
	others := false
	for _, st := range c.stats() {
		if st.Model != "" && c.labels.label(st.Model) == otherModels {
			others = true
			other.Admissions += st.Admissions
			other.WaitSum += st.WaitSum
			if other.WaitBuckets == nil {
				other.WaitBuckets = make([]uint64, len(st.WaitBuckets))
			}
			for i, n := range st.WaitBuckets {
				if i < len(other.WaitBuckets) {
					other.WaitBuckets[i] += n
				}
			}
			for code, n := range st.Refusals {
				other.Refusals[code] += n
			}
			continue
		}
		emitAdmissions(ch, &st, st.Model)
	}
	if others {
		emitAdmissions(ch, &other, otherModels)
	}
}

func emitAdmissions(ch chan<- prometheus.Metric, st *runtime.AdmissionStats, model string) {
	if model == "" {
		model = unknownModel
	} else {
		ch <- prometheus.MustNewConstMetric(descAdmissions, prometheus.CounterValue, float64(st.Admissions), model)
		buckets := make(map[float64]uint64, len(waitBuckets))
		for i, b := range waitBuckets {
			if i < len(st.WaitBuckets) {
				buckets[b] = st.WaitBuckets[i]
			}
		}
		ch <- prometheus.MustNewConstHistogram(descWait, st.Admissions, st.WaitSum.Seconds(), buckets, model)
	}
	for code, n := range st.Refusals {
		if n > 0 {
			ch <- prometheus.MustNewConstMetric(descRejections, prometheus.CounterValue, float64(n), model, core.Code(code).String())
		}
	}
}

// Register adds collectors the server's other parts own (the serving
// edge's connection and body metrics: edge.Edge.Collectors).
func (m *Metrics) Register(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }

// Checker is what Checks reads: *runtime.Runtime.
type Checker interface {
	InvariantViolations() int64
	Disagreements() int64
}

// Checks registers the scheduler's self-checks: invariant violations found
// by the live checks (--live-invariants) and effects the runtime could not
// carry out as the core said. Both are bugs when they are not 0.
func (m *Metrics) Checks(rt Checker) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_invariant_violations_total",
			Help: "Scheduler events after which a live check (--live-invariants) found the core's invariants broken; not 0 is a bug."},
			func() float64 { return float64(rt.InvariantViolations()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_core_disagreements_total",
			Help: "Scheduler effects the runtime could not carry out as the core said; not 0 is a bug."},
			func() float64 { return float64(rt.Disagreements()) }),
	)
}
