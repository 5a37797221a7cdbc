package server

import (
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/realtime"
)

// realtimeHandler wires the live-transcription adapter
// (server/internal/realtime, GET /v1/realtime) to the runtime, the engines
// and the edge: a session is admitted through the same task lease as the
// audio endpoints, and the server's shutdown ends the sessions s.live
// tracks (CONTRACT.md live.shutdown).
func (s *Server) realtimeHandler() *realtime.Handler {
	c := &s.cfg
	return realtime.New(realtime.Deps{
		Runtime:  s.rt,
		Engines:  s.roots.Engines(),
		Sessions: s.live,
		Config: realtime.Config{AllowedOrigins: c.AllowedOrigins, WriteTimeout: c.WriteTimeout,
			Idle: c.RealtimeIdle, MaxSession: c.RealtimeMaxSession, Drain: c.RealtimeDrain, Buffer: c.RealtimeBuffer,
			MaxRate: c.RealtimeMaxRate, VADModel: c.RealtimeVADModel},
		ValidModelID: httpapi.ValidModelID,
		Lease:        s.taskLease,
	})
}
