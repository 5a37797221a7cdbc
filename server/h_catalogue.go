package server

import (
	"net/http"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/modelsroot"
)

// CatalogueList is the answer of GET /v1/catalogue and PUT
// /v1/settings/models-root (server/internal/modelsroot).
type CatalogueList = modelsroot.List

// Checkpoint is one entry of CatalogueList.
type Checkpoint = modelsroot.Checkpoint

// handleCatalogue answers GET /v1/catalogue: the checkpoints under the
// models root with their manifests and parallel admission.
func (s *Server) handleCatalogue(w http.ResponseWriter, r *http.Request) error {
	root, cat, err := s.roots.Current(r.Context())
	if r.Context().Err() != nil && err == r.Context().Err() {
		return scanStopped(err)
	}
	if err != nil { // the answer says only what is wrong; the reasons, once, for the operator
		s.scanLogged.Do(func() { s.log.Warn("models root failed its scan", "models_root", root, "err", err) })
	}
	return httpapi.WriteJSON(w, modelsroot.ListOf(root, cat, err))
}

// ModelsRootRequest is the body of PUT /v1/settings/models-root.
type ModelsRootRequest struct {
	ModelsRoot string `json:"models_root"`
}

// handleSetModelsRoot answers PUT /v1/settings/models-root (management):
// the new folder is scanned and validated completely first, then folder and
// catalogue are swapped together; a failure keeps the old pair (CONTRACT.md
// fail.models-root: 400 for a bad folder, 500 for an internal fault).
// Registered models keep the checkpoints they resolved. 200 with the new
// catalogue.
func (s *Server) handleSetModelsRoot(w http.ResponseWriter, r *http.Request) error {
	var body ModelsRootRequest
	if err := edge.Decode(r, &body); err != nil {
		return err
	}
	if body.ModelsRoot == "" {
		return httpapi.InvalidParam("models_root", "models_root is required")
	}
	cat, err := s.roots.Set(r.Context(), body.ModelsRoot)
	if err != nil && r.Context().Err() != nil {
		return scanStopped(err) // the client left: the scan stopped, nothing changed
	}
	if err != nil {
		e := modelsroot.ScanError(body.ModelsRoot, err)
		if e.Status < 500 { // the reasons, for the operator only
			httpapi.Logger(r.Context()).Info("models root refused", "models_root", body.ModelsRoot, "err", err)
		}
		return e
	}
	httpapi.Logger(r.Context()).Info("models root changed", "models_root", cat.Root, "checkpoints", len(cat.Names()))
	return httpapi.WriteJSON(w, modelsroot.ListOf(cat.Root, cat, nil))
}

// scanStopped is a scan that stopped because its client went away.
func scanStopped(err error) *httpapi.Error {
	return httpapi.FromCode(core.CodeCancelled, "the client went away; the scan stopped and nothing changed", err)
}
