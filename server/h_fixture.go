package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// The fixture-control endpoints exist only with --fixture, behind the
// management check ("Fixture control"): a black-box client holds a
// backend step at a named gate and releases it, to reach a state such as
// "A is loading" without sleeping.

// GateList is the answer of GET /v1/fixture/gates.
type GateList struct {
	Gates []fixture.GateInfo `json:"gates"`
}

// handleListGates answers GET /v1/fixture/gates.
func (s *Server) handleListGates(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, GateList{Gates: s.fx.Gates().List()})
}

// handleOpenGate answers POST /v1/fixture/gates/{name}/open: steps waiting
// there go on, later steps pass. It answers the gate as it is afterwards.
func (s *Server) handleOpenGate(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	if !httpapi.ValidName(name, 128) {
		return httpapi.InvalidParam("name", "gate name %q must match [A-Za-z0-9._-]{1,128}", name)
	}
	g := s.fx.Gates()
	g.Open(name)
	return httpapi.WriteJSON(w, fixture.GateInfo{Name: name, Open: true, Waiting: g.Waiting(name)})
}
