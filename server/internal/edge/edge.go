// Package edge is the server's serving edge (CONTRACT.md "Connections and
// request bodies", matrix edge; err.host, err.origin): every accepted
// connection and its deadlines (conn.go), the tracker and the connection
// limit (conns.go), the bounds of every request body and the spooling of
// uploads (limits.go, spool.go), and the Host allow-list and cross-origin check (origin.go).
//
// It knows nothing of the API behind it: its refusals are written by the
// error writer the server hands it (Config.WriteError), in whatever shape
// the request's protocol answers.
package edge

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// retryAfterSeconds is the Retry-After of the edge's own 503 (a connection
// past the limit), the server's server_busy default.
const retryAfterSeconds = 1

var jsonContentType = []string{"application/json"}

// Config is what the edge takes from the server's configuration.
type Config struct {
	// Listen is the listen address: its host joins the Host allow-list
	// unless it is unspecified (err.host).
	Listen string
	// AllowedHosts and AllowedOrigins are --allowed-hosts and
	// --allowed-origins (err.host, err.origin).
	AllowedHosts, AllowedOrigins []string

	// MaxConns is --max-conns: 0 derives it from RLIMIT_NOFILE, < 0 is
	// no limit (edge.conn-limit).
	MaxConns int
	// WriteTimeout is every socket write's deadline; 0: none
	// (edge.write-timeout).
	WriteTimeout time.Duration

	// MaxBody bounds every request body (413 over it); MaxJSONBody a JSON
	// body (edge.json-limit).
	MaxBody, MaxJSONBody int64
	// BodyReadTimeout bounds a whole body, MinBodyRate (bytes/s) its rate
	// once BodyRateGrace has passed (edge.body-timeout,
	// edge.body-min-rate); 0: none.
	BodyReadTimeout time.Duration
	MinBodyRate     int64
	BodyRateGrace   time.Duration
	// SpoolThreshold: uploads longer than this are spooled to a file in
	// SpoolDir ("": os.TempDir()) (edge.upload-spool).
	SpoolThreshold int64
	SpoolDir       string
	// BodyBudget and SpoolBudget bound the body bytes in flight, in memory
	// and on disk (edge.body-budget); 0: unlimited.
	BodyBudget, SpoolBudget int64

	// WriteError writes the edge's refusals (the server's one error
	// writer: its shape, its refusal log and counts).
	WriteError func(http.ResponseWriter, *http.Request, error)
	// Log receives the connection limit in use at start.
	Log *slog.Logger
}

// Edge is the serving edge of one server.
type Edge struct {
	conns      *tracker
	limits     *bodyLimits
	maxBody    int64
	hosts      *hostAllowList
	origins    *http.CrossOriginProtection
	writeError func(http.ResponseWriter, *http.Request, error)
}

// New builds the edge from cfg: the Host allow-list and the origin check
// (an entry that is not a host name or an origin is an error), the body
// limits and budgets, the write timeout and the connection limit. It logs
// the connection limit in use.
func New(cfg Config) (*Edge, error) {
	hosts, err := newHostAllowList(cfg.Listen, cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	origins, err := newOriginCheck(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	t := newTracker()
	e := &Edge{conns: t, maxBody: cfg.MaxBody, hosts: hosts, origins: origins, writeError: cfg.WriteError}
	e.limits = &bodyLimits{readTimeout: cfg.BodyReadTimeout, minRate: cfg.MinBodyRate, grace: cfg.BodyRateGrace,
		threshold: cfg.SpoolThreshold, maxJSON: cfg.MaxJSONBody, spoolDir: cfg.SpoolDir,
		mem: &budget{limit: cfg.BodyBudget, changed: t.notify}, disk: &budget{limit: cfg.SpoolBudget, changed: t.notify}}
	t.writeTimeout = cfg.WriteTimeout
	maxConns, nofile := cfg.MaxConns, fileLimit()
	if maxConns == 0 {
		maxConns = autoMaxConns(nofile)
	}
	t.maxConns = maxConns
	log.Info("connection limit", "max_conns", maxConns, "rlimit_nofile", nofile, "write_timeout", cfg.WriteTimeout,
		"body_read_timeout", cfg.BodyReadTimeout, "min_body_rate", cfg.MinBodyRate)
	return e, nil
}

// Listener wraps ln so that every accepted connection is tracked and
// counted against the connection limit (edge.conn-limit).
func (e *Edge) Listener(ln net.Listener) net.Listener {
	return &trackedListener{Listener: ln, t: e.conns}
}

// ConnState is the http.Server's ConnState hook.
func (e *Edge) ConnState(c net.Conn, st http.ConnState) { e.conns.connState(c, st) }

// BeginShutdown starts the progress tracking of shutdown
// (time.shutdown-stalled-io); it returns a channel closed when the last
// connection has closed.
func (e *Edge) BeginShutdown(now time.Time) <-chan struct{} { return e.conns.beginShutdown(now) }

// Tick gives every connection its deadlines for one slice of the
// shutdown's slice loop.
func (e *Edge) Tick(now time.Time) { e.conns.tick(now) }

// Count returns the number of open connections.
func (e *Edge) Count() int { return e.conns.count() }

// Conns returns the open connections.
func (e *Edge) Conns() []*Conn { return e.conns.snapshot() }

// AwaitConns blocks until cond holds for the open connections or ctx
// ends; tests use it to know that a client reached a phase (or a body its
// reservation) without sleeping.
func (e *Edge) AwaitConns(ctx context.Context, cond func([]*Conn) bool) error {
	return e.conns.awaitConns(ctx, cond)
}

// MaxConns is the connection limit in force (<= 0: none).
func (e *Edge) MaxConns() int { return e.conns.maxConns }

// Open is the number of connections accepted and not yet closed.
func (e *Edge) Open() int64 { return e.conns.open.Load() }

// Evicted is the number of connections closed to make room for a new one.
func (e *Edge) Evicted() int64 { return e.conns.evicted.Load() }

// BodyBytes returns the request body bytes reserved by requests in
// flight, in memory and on disk (edge.body-budget).
func (e *Edge) BodyBytes() (mem, disk int64) { return e.limits.mem.inUse(), e.limits.disk.inUse() }

// Collectors are the edge's metrics (CONTRACT.md "Connections and request
// bodies"): open connections against --max-conns, connections closed or
// refused for it, and the body bytes in flight against their budgets.
// They read the edge's own counters at scrape time.
func (e *Edge) Collectors() []prometheus.Collector {
	t, l := e.conns, e.limits
	gauge := func(name, help string, labels prometheus.Labels, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	const bodyHelp = "Request body bytes held by requests in flight, in memory or spooled to disk."
	const budgetHelp = "The budget of request body bytes in flight (--body-budget, --spool-budget; 0: unlimited)."
	return []prometheus.Collector{
		gauge("sluice_http_open_connections", "Open client connections.", nil, func() float64 { return float64(t.open.Load()) }),
		gauge("sluice_http_max_connections", "The connection limit in force (--max-conns; 0: none).", nil,
			func() float64 { return float64(max(t.maxConns, 0)) }),
		counter("sluice_http_connections_evicted_total", "Connections closed to make room for a new one at --max-conns.",
			func() float64 { return float64(t.evicted.Load()) }),
		counter("sluice_http_connections_refused_total", "Connections answered 503 and closed at accept: over --max-conns and its probe reserve.",
			func() float64 { return float64(t.refused.Load()) }),
		gauge("sluice_http_body_bytes", bodyHelp, prometheus.Labels{"store": "memory"}, func() float64 { return float64(l.mem.inUse()) }),
		gauge("sluice_http_body_bytes", bodyHelp, prometheus.Labels{"store": "disk"}, func() float64 { return float64(l.disk.inUse()) }),
		gauge("sluice_http_body_budget_bytes", budgetHelp, prometheus.Labels{"store": "memory"}, func() float64 { return float64(l.mem.limit) }),
		gauge("sluice_http_body_budget_bytes", budgetHelp, prometheus.Labels{"store": "disk"}, func() float64 { return float64(l.disk.limit) }),
	}
}
