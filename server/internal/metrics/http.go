package metrics

import (
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// requestBuckets are the bounds of sluice_http_request_duration_seconds:
// from a probe's milliseconds to a long synthesis or a stream of minutes.
var requestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// unmatchedRoute labels requests that matched no route (404s, and those
// refused before routing: Host, origin, credential, body limits), so that
// raw paths never become label values.
const unmatchedRoute = "unmatched"

// httpMetrics are the request metrics of the HTTP API: a duration
// histogram by route pattern, method and status class, observed when the
// handler returns (a stream when it ends), and the requests in flight.
// Every label comes from a fixed set: chi's route patterns (the routes
// registered in routes.go, never the raw path), seven methods and
// "other", and five status classes.
type httpMetrics struct {
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge

	// observers holds the duration's children already resolved
	// (labelKey -> *observerEntry), so that a request pays one map lookup
	// instead of the vector's hashing and locking (WithLabelValues). A
	// child is created (and then exported) only when a request first has
	// its labels, as WithLabelValues did.
	observers sync.Map
	// last is the entry a request last used: the usual run of requests
	// on one route compares its labels instead of hashing them.
	last atomic.Pointer[observerEntry]
}

// observerEntry is one resolved child with its labels (created once, then
// only read).
type observerEntry struct {
	k    labelKey
	o    prometheus.Observer
	pats []string // chi's route patterns k.route was computed from (nil: unmatched)
}

// labelKey is one label set of the duration histogram.
type labelKey struct{ route, method, status string }

// observerFor returns the duration's child for a request that matched
// chi's route patterns pats (rc nil: none). The route label is chi's
// RoutePattern of them, a function of pats alone: when they are those of
// the last entry, with the same method and status, that entry answers
// without the pattern being built again.
func (h *httpMetrics) observerFor(rc *chi.Context, method, status string) prometheus.Observer {
	var pats []string
	if rc != nil {
		pats = rc.RoutePatterns
	}
	if e := h.last.Load(); e != nil && e.k.method == method && e.k.status == status && slices.Equal(e.pats, pats) {
		return e.o
	}
	route := unmatchedRoute
	if rc != nil {
		if p := rc.RoutePattern(); p != "" {
			route = p
		}
	}
	return h.observer(labelKey{route, method, status}, pats)
}

// observer returns the duration's child for k, resolving it once; pats
// are the route patterns of the request (kept with a new entry).
func (h *httpMetrics) observer(k labelKey, pats []string) prometheus.Observer {
	if e := h.last.Load(); e != nil && e.k == k {
		return e.o
	}
	v, ok := h.observers.Load(k)
	if !ok {
		// WithLabelValues returns the same child for the same labels, so
		// two first requests racing here store one child between them.
		v, _ = h.observers.LoadOrStore(k, &observerEntry{k: k, o: h.duration.WithLabelValues(k.route, k.method, k.status),
			pats: slices.Clone(pats)})
	}
	e := v.(*observerEntry)
	h.last.Store(e)
	return e.o
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	h := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_http_request_duration_seconds",
			Help:    "Time from a request's arrival to its handler's return (a stream's end), by route pattern, method and status class.",
			Buckets: requestBuckets,
		}, []string{"route", "method", "status"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_http_requests_in_flight", Help: "HTTP requests being served (open streams included).",
		}),
	}
	reg.MustRegister(h.duration, h.inFlight)
	return h
}

// Middleware measures every request; it must wrap the router's other
// middleware so that refusals before routing are measured too.
func (m *Metrics) Middleware(next http.Handler) http.Handler { return m.http.middleware(next) }

// middleware is kept out of line, as edge.LimitBody is, so that its
// closure is compiled with the calls in it inlined.
//
//go:noinline
func (h *httpMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.inFlight.Inc()
		rec := &statusRecorder{ResponseWriter: w}
		returned := false
		defer func() {
			h.inFlight.Dec()
			code := rec.status
			if !returned && code == 0 {
				code = http.StatusInternalServerError // a panic: net/http drops the connection
			}
			h.observerFor(chi.RouteContext(r.Context()), methodLabel(r.Method), statusClass(code)).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
		returned = true
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flush,
// deadlines) through the recorder.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// methodLabel keeps the method label to a fixed set: a client may send any
// token as its method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions:
		return m
	}
	return "other"
}

// statusClass is "2xx" and so on; a handler that wrote nothing answered
// 200 (net/http's default).
func statusClass(code int) string {
	switch {
	case code == 0:
		return "2xx"
	case code < 200:
		return "1xx"
	case code < 300:
		return "2xx"
	case code < 400:
		return "3xx"
	case code < 500:
		return "4xx"
	}
	return "5xx"
}

// Build describes the running binary, from debug.ReadBuildInfo: the main
// module's version, the VCS revision and whether the tree was modified
// (both empty when the build recorded no VCS data, as in `go test`), and
// the Go version.
type Build struct {
	Version   string
	Revision  string
	Time      string
	Modified  bool
	GoVersion string
}

// BuildInfo reads the running binary's build information.
func BuildInfo() Build {
	b := Build{Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// buildInfoCollector is sluice_build_info: 1, labelled with the version,
// the revision ("unknown" without VCS data; "-dirty" appended for a
// modified tree) and the Go version.
func buildInfoCollector() prometheus.Collector {
	b := BuildInfo()
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	}
	if b.Modified {
		rev += "-dirty"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_build_info", Help: "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": rev, "goversion": b.GoVersion},
	}, func() float64 { return 1 })
}
