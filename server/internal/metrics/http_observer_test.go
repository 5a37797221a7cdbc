package metrics

import (
	"testing"

	"github.com/go-chi/chi/v5"
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
			if got := h.observer(k, nil); got != want {
				t.Fatalf("observer(%v) is another label set's child", k)
			}
		}
	}
}

// A request's route label is chi's RoutePattern of its patterns, also when
// the last entry's are reused: alternating routes, methods and statuses,
// and requests that matched no route, each get their own label set's
// child.
func TestObserverForRoutePatterns(t *testing.T) {
	h := newHTTPMetrics(prometheus.NewRegistry())
	infer := &chi.Context{RoutePatterns: []string{"/v1/models/{id}/infer"}}
	nested := &chi.Context{RoutePatterns: []string{"/v1/*", "/models"}}
	none := &chi.Context{}
	for _, c := range []struct {
		rc             *chi.Context
		method, status string
	}{
		{infer, "POST", "2xx"}, {infer, "POST", "2xx"}, {nested, "GET", "2xx"}, {infer, "POST", "5xx"},
		{nil, "GET", "4xx"}, {none, "GET", "4xx"}, {infer, "GET", "4xx"}, {nested, "GET", "2xx"}, {nil, "GET", "4xx"},
	} {
		route := unmatchedRoute
		if c.rc != nil && c.rc.RoutePattern() != "" {
			route = c.rc.RoutePattern()
		}
		want := h.duration.WithLabelValues(route, c.method, c.status)
		if got := h.observerFor(c.rc, c.method, c.status); got != want {
			t.Fatalf("observerFor(%v, %s, %s) is not the child of route %q", c.rc, c.method, c.status, route)
		}
	}
}
