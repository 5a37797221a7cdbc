package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// A handler that panics before answering is counted as a 5xx of its route
// (net/http drops the connection), and leaves nothing in flight.
func TestHTTPMetricsPanic(t *testing.T) {
	m := New(func() []core.ModelStatus { return nil }, func() []runtime.AdmissionStats { return nil })
	reg := m.reg
	r := chi.NewRouter()
	r.Use(m.Middleware)
	r.Get("/boom/{n}", func(http.ResponseWriter, *http.Request) { panic("boom") })
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/boom/7", nil))
	}()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if mf.GetName() == "sluice_http_requests_in_flight" && mf.GetMetric()[0].GetGauge().GetValue() != 0 {
			t.Errorf("in flight after the panic: %v", mf.GetMetric()[0].GetGauge().GetValue())
		}
		if mf.GetName() != "sluice_http_request_duration_seconds" {
			continue
		}
		if seen = len(mf.GetMetric()); seen != 1 {
			t.Fatalf("%d series", seen)
		}
		m := mf.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["route"] != "/boom/{n}" || labels["status"] != "5xx" || m.GetHistogram().GetSampleCount() != 1 {
			t.Fatalf("%v %d", labels, m.GetHistogram().GetSampleCount())
		}
	}
	if seen != 1 {
		t.Fatal("no request series")
	}
}
