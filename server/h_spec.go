package server

import (
	"net/http"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
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
		return fromRuntime(err)
	}
	return writeJSON(w, specOf(&cfg, s.cfg.ParallelJobs, s.roots.path()))
}

// specOf converts a committed config back into a model spec.
func specOf(c *core.Config, parallel bool, root string) ModelSpec {
	spec := runtime.SpecOf(c)
	spec.Checkpoint = relCheckpoint(root, spec.Checkpoint)
	return specJSON(&spec, parallel)
}

// relCheckpoint undoes resolveCheckpoint where it can: an absolute path
// inside root becomes relative to it; anything else is returned unchanged
// (an engine-specific name, or a path under a models root that was since
// replaced, which a PUT then refuses).
func relCheckpoint(root, cp string) string {
	if !filepath.IsAbs(cp) {
		return cp
	}
	if root == "" {
		root = "."
	}
	base, err := filepath.Abs(root)
	if err != nil {
		return cp
	}
	if real, err := filepath.EvalSymlinks(base); err == nil {
		base = real
	}
	rel, err := filepath.Rel(base, cp)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return cp
	}
	return filepath.ToSlash(rel)
}
