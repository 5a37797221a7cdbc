package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The last-used entry answers only for its own labels: alternating label
// sets each get their own child, the one WithLabelValues gives.
func TestObserverAlternatingLabels(t *testing.T) {
	h := newHTTPMetrics(prometheus.NewRegistry())
	a := labelKey{"/v1/models/{id}/infer", "POST", "2xx"}
	b := labelKey{"/v1/models", "GET", "2xx"}
	c := labelKey{"/v1/models/{id}/infer", "POST", "4xx"}
	for range 3 {
		for _, k := range []labelKey{a, b, a, c, c, b} {
			want := h.duration.WithLabelValues(k.route, k.method, k.status)
			if got := h.observer(k); got != want {
				t.Fatalf("observer(%v) is another label set's child", k)
			}
		}
	}
}
