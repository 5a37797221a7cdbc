package server

// The server's side of its observability packages: what the metrics
// (server/internal/metrics) and the event stream (server/internal/events)
// read from package server.

import (
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/metrics"
)

// edgeMetrics is what the serving edge's metrics read at scrape time
// (CONTRACT.md "Connections and request bodies"): the connection tracker's
// and the body budgets' own counters.
func edgeMetrics(t *connTracker, l *bodyLimits) metrics.Edge {
	return metrics.Edge{
		Open:         func() float64 { return float64(t.open.Load()) },
		MaxConns:     func() float64 { return float64(max(t.maxConns, 0)) },
		Evicted:      func() float64 { return float64(t.evicted.Load()) },
		Refused:      func() float64 { return float64(t.refused.Load()) },
		BodyMemory:   func() float64 { return float64(l.mem.inUse()) },
		BodyDisk:     func() float64 { return float64(l.disk.inUse()) },
		BudgetMemory: func() float64 { return float64(l.mem.limit) },
		BudgetDisk:   func() float64 { return float64(l.disk.limit) },
	}
}

// Build describes the running binary (metrics.BuildInfo).
type Build = metrics.Build

// BuildInfo reads the running binary's build information.
func BuildInfo() Build { return metrics.BuildInfo() }

// statusObject is an event's status object: the model object of
// GET /v1/models/{id}, its created included, so the stream's objects equal
// the API's.
func (s *Server) statusObject(st core.ModelStatus) any {
	m := s.model(st)
	return &m
}
