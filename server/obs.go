package server

// The server's side of its observability packages: what the metrics
// (server/internal/metrics) and the event stream (server/internal/events)
// read from package server.

import (
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/events"
	"github.com/sluice-dev/sluice/server/internal/metrics"
)

// Event is an event of GET /v1/events as a client decodes it: the
// stream's fields (server/internal/events) with its status as the model
// object of GET /v1/models/{id}.
type Event struct {
	events.Event
	Status *Model `json:"status,omitempty"`
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
