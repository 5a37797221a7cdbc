package server

import (
	"net/http"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/modelspec"
)

// handleGetSpec answers GET /v1/models/{id}/spec (management): the model's
// committed spec in the shape PUT /v1/models/{id} takes, so a client can
// change one field (the dashboard's slot count) and PUT the rest unchanged.
// The checkpoint is given relative to the current models root when it lies
// inside it; slots are left out in the legacy mode; admission_timeout_ms is
// left out when the model inherits the server default.
func (s *Server) handleGetSpec(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	cfg, _, err := s.rt.ConfigOf(id)
	if err != nil {
		return httpapi.FromRuntime(err)
	}
	return httpapi.WriteJSON(w, modelspec.Of(&cfg, s.cfg.ParallelJobs, s.roots.Path()))
}
