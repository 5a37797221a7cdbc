package server

import (
	"net/http"

	"github.com/sluice-dev/sluice/core"
)

// The management endpoints (issue 5, "Management"). The router's management
// middleware answers 403 permission_error without --ui-management
// (CONTRACT.md err.permission) before any of these run.

// handleApply answers PUT /v1/models/{id}: register an unknown ID or
// reconfigure a known one, then load; 200 with the model object. The spec is
// validated completely (schema, mode, slot range, checkpoint, engine) before
// anything live changes, so an invalid spec is 400 even while shutting down
// (CONTRACT.md reg.invalid, ops.shutting-down.reconfigure).
func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	var body ModelSpec
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	spec, err := body.ToRuntime(s.cfg.ParallelJobs, s.roots.path()) // the root swaps with its catalogue (issue 9)
	if err != nil {
		return err
	}
	var before core.ModelStatus
	var unknown error
	if s.reg != nil {
		_, before, unknown = s.rt.ConfigOf(id)
	}
	st, err := s.rt.Apply(r.Context(), id, spec)
	if err != nil {
		// A registration commits before its first load, and a reconfigure
		// before its load: what committed is recorded even though the
		// answer is an error; nothing is recorded when nothing committed
		// (CONTRACT.md persist.committed-only).
		if s.reg == nil {
			return fromRuntime(err)
		}
		if _, after, aerr := s.rt.ConfigOf(id); aerr != nil || unknown == nil && after.ConfigVersion == before.ConfigVersion {
			return fromRuntime(err)
		}
		if rerr := s.recordModels([]string{id}, keepDesired); rerr != nil {
			logger(r.Context()).Error("committed change not durable", "model", id, "err", rerr)
		}
		return fromRuntime(err)
	}
	if err := s.recordModels([]string{id}, wantLoaded); err != nil { // persist.durable-before-200
		return notDurable(err)
	}
	logger(r.Context()).Info("model applied", "model", id, "config_version", st.ConfigVersion, "slots", st.Slots)
	return writeJSON(w, modelOf(st))
}

// handleLoad answers POST /v1/models/{id}/load: 200 with the model object
// once loaded, 404 for an unknown ID.
func (s *Server) handleLoad(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	st, err := s.rt.Load(r.Context(), id)
	if err != nil {
		return fromRuntime(err)
	}
	if err := s.recordModels([]string{id}, wantLoaded); err != nil { // CONTRACT.md persist.durable-before-200
		return notDurable(err)
	}
	return writeJSON(w, modelOf(st))
}

// handleUnload answers POST /v1/models/{id}/unload: 200 {"id","loaded":false}
// after the teardown (idempotent), 404 for an unknown ID.
func (s *Server) handleUnload(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	st, err := s.rt.Unload(r.Context(), id)
	if err != nil {
		return fromRuntime(err)
	}
	if err := s.recordModels([]string{id}, wantUnloaded); err != nil { // CONTRACT.md persist.durable-before-200
		return notDurable(err)
	}
	return writeJSON(w, UnloadResult{ID: id, Loaded: st.Loaded})
}

// handleBulkUnload answers POST /v1/models/unload with {"models":[...]}: 200
// {"unloaded":[...],"not_found":[...]} when every member has finished;
// unknown IDs go to not_found and never fail the known ones (CONTRACT.md
// err.not-found). A malformed ID is malformed input: 400.
func (s *Server) handleBulkUnload(w http.ResponseWriter, r *http.Request) error {
	var body BulkUnloadRequest
	if err := decodeStrict(r, &body); err != nil {
		return err
	}
	if body.Models == nil {
		return Invalid("models is required")
	}
	for _, id := range body.Models {
		if err := validModelID(id); err != nil {
			return err
		}
	}
	res, err := s.rt.BulkUnload(r.Context(), body.Models)
	if err != nil {
		return fromRuntime(err)
	}
	if err := s.recordModels(res.Unloaded, wantUnloaded); err != nil { // CONTRACT.md persist.durable-before-200: one write for all
		return notDurable(err)
	}
	out := BulkUnloadResult{Unloaded: res.Unloaded, NotFound: res.NotFound}
	if out.Unloaded == nil {
		out.Unloaded = []string{}
	}
	if out.NotFound == nil {
		out.NotFound = []string{}
	}
	return writeJSON(w, out)
}
