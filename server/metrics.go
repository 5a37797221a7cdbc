package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/core"
)

// metrics are Sluice's Prometheus metrics. Gauges of the model state are read
// from one atomic status snapshot per scrape; counters and histograms are
// updated as requests are answered.
type metrics struct {
	reg        *prometheus.Registry
	admissions *prometheus.CounterVec
	rejections *prometheus.CounterVec
	wait       *prometheus.HistogramVec
	loads      *prometheus.HistogramVec
	loadFails  *prometheus.CounterVec
	unloads    *prometheus.HistogramVec
}

func newMetrics(status func() []core.ModelStatus) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_admissions_total", Help: "Requests granted a slot.",
		}, []string{"model"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rejections_total", Help: "Requests and managers refused, by reason.",
		}, []string{"model", "reason"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_admission_wait_seconds", Help: "Time from submission to grant.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"model"}),
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
	m.reg.MustRegister(m.admissions, m.rejections, m.wait, m.loads, m.loadFails, m.unloads, statusCollector(status),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	descActive = prometheus.NewDesc("sluice_active_slots", "Slots held by admitted requests.", []string{"model"}, nil)
	descQueued = prometheus.NewDesc("sluice_queued_requests", "Requests waiting in the model's FIFO.", []string{"model"}, nil)
	descQMgr   = prometheus.NewDesc("sluice_queued_managers", "Management operations waiting in the model's FIFO.", []string{"model"}, nil)
	descSlots  = prometheus.NewDesc("sluice_slots", "Configured slots.", []string{"model"}, nil)
	descState  = prometheus.NewDesc("sluice_model_state", "1 for the model's current state.", []string{"model", "state"}, nil)
	descRes    = prometheus.NewDesc("sluice_resident_megabytes", "Memory charged to the residency budget.", []string{"model"}, nil)
)

// statusCollector exports per-model gauges from one status snapshot.
type statusCollector func() []core.ModelStatus

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descQueued, descQMgr, descSlots, descState, descRes} {
		ch <- d
	}
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c() {
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(s.ActiveSlots), s.ID)
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(s.QueuedRequests), s.ID)
		ch <- prometheus.MustNewConstMetric(descQMgr, prometheus.GaugeValue, float64(s.QueuedManagers), s.ID)
		ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(s.Slots), s.ID)
		ch <- prometheus.MustNewConstMetric(descRes, prometheus.GaugeValue, float64(s.ResidentMB), s.ID)
		for st := core.Unloaded; st <= core.Unloading; st++ {
			v := 0.0
			if s.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, s.ID, st.String())
		}
	}
}
