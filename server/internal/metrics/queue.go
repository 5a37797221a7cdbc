package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/core"
)

// The autoscaling signal (CONTRACT.md oip.scale-signal): how much work waits
// and how full the slots are, computed at scrape time from one status
// snapshot, so the values of one scrape agree with each other and with
// GET /v1/models. deploy/ scales on them: a HorizontalPodAutoscaler
// through prometheus-adapter (sluice_queue_depth per pod) and a KEDA
// ScaledObject (the same query). The per-model depth is
// sluice_queued_requests{model} (metrics.go).
var (
	descQueueDepth = prometheus.NewDesc("sluice_queue_depth",
		"Requests waiting in every model's FIFO, all models together: the autoscaling signal.", nil, nil)
	descSaturation = prometheus.NewDesc("sluice_slot_saturation",
		"Active slots over configured slots of the model's published pool, 0..1 (0 without a pool; model=\"_other\": those models together).",
		[]string{"model"}, nil)
	descSaturationAll = prometheus.NewDesc("sluice_slot_saturation_all",
		"Active slots over configured slots of every published pool together, 0..1 (0 when none is published).", nil, nil)
)

// queueCollector exports the autoscaling gauges from one status snapshot;
// the models past modelSeriesLimit share model="_other" as in
// statusCollector.
type queueCollector struct {
	status func() []core.ModelStatus
	labels *modelLabels
}

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQueueDepth
	ch <- descSaturation
	ch <- descSaturationAll
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	type fill struct{ active, slots int }
	var depth int
	var all fill
	per := map[string]*fill{}
	var order []string
	for _, st := range c.status() {
		depth += st.QueuedRequests
		l := c.labels.label(st.ID)
		f := per[l]
		if f == nil {
			f = &fill{}
			per[l] = f
			order = append(order, l)
		}
		if st.Loaded && st.Slots > 0 {
			f.active += st.ActiveSlots
			f.slots += st.Slots
			all.active += st.ActiveSlots
			all.slots += st.Slots
		}
	}
	ratio := func(f fill) float64 {
		if f.slots == 0 {
			return 0
		}
		return min(1, float64(f.active)/float64(f.slots))
	}
	ch <- prometheus.MustNewConstMetric(descQueueDepth, prometheus.GaugeValue, float64(depth))
	ch <- prometheus.MustNewConstMetric(descSaturationAll, prometheus.GaugeValue, ratio(all))
	for _, l := range order {
		ch <- prometheus.MustNewConstMetric(descSaturation, prometheus.GaugeValue, ratio(*per[l]), l)
	}
}
