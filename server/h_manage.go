package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/registry"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// The management endpoints. The router's management
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
	if err := edge.Decode(r, &body); err != nil {
		return err
	}
	spec, err := body.ToRuntime(s.cfg.ParallelJobs, s.roots.Path()) // the root swaps with its catalogue
	if err != nil {
		return err
	}
	// Behind --max-models; the registry records the change before it
	// returns, also one that committed and then failed (CONTRACT.md
	// persist.durable-before-200, persist.committed-only).
	st, err := s.apply(r.Context(), id, spec, s.reg.Apply)
	if err != nil {
		return err
	}
	httpapi.Logger(r.Context()).Info("model applied", "model", id, "config_version", st.ConfigVersion, "slots", st.Slots)
	return httpapi.WriteJSON(w, s.model(st))
}

// handleLoad answers POST /v1/models/{id}/load: 200 with the model object
// once loaded, 404 for an unknown ID.
func (s *Server) handleLoad(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	st, err := s.reg.Load(r.Context(), id) // durable before it returns (CONTRACT.md persist.durable-before-200)
	if err != nil {
		return manageErr(err)
	}
	return httpapi.WriteJSON(w, s.model(st))
}

// handleUnload answers POST /v1/models/{id}/unload: 200 {"id","loaded":false}
// after the teardown (idempotent), 404 for an unknown ID.
func (s *Server) handleUnload(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	st, err := s.reg.Unload(r.Context(), id) // durable before it returns (CONTRACT.md persist.durable-before-200)
	if err != nil {
		return manageErr(err)
	}
	return httpapi.WriteJSON(w, wire.UnloadResult{ID: id, Loaded: st.Loaded})
}

// handleDelete answers DELETE /v1/models/{id} (OpenAI's models.delete):
// 200 {"id","object":"model","deleted":true} once the model is gone, 404
// for an unknown ID. It is a barrier like an unload: work admitted before
// it finishes and the pool is torn down; requests and managers that arrive
// meanwhile queue behind it and then get 404 not_found; the ID's tombstone
// keeps its last config_version, durable before the answer, so a later PUT
// registers it at a version it never had (CONTRACT.md unreg.*).
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	st, err := s.reg.Unregister(r.Context(), id) // the tombstone durable before it returns (CONTRACT.md persist.durable-before-200)
	if err != nil && !registry.NotDurable(err) {
		return httpapi.ModelNotFoundErr(manageErr(err)) // OpenAI's models.delete: param model (err.not-found)
	}
	s.created.Forget(id) // unregistered, durable or not
	if err != nil {
		return manageErr(err)
	}
	httpapi.Logger(r.Context()).Info("model unregistered", "model", id, "config_version", st.ConfigVersion)
	return httpapi.WriteJSON(w, wire.DeletedModel{ID: id, Object: "model", Deleted: true})
}

// handleBulkUnload answers POST /v1/models/unload with {"models":[...]}: 200
// {"unloaded":[...],"not_found":[...]} when every member has finished;
// unknown IDs go to not_found and never fail the known ones (CONTRACT.md
// err.not-found). A malformed ID is malformed input: 400.
func (s *Server) handleBulkUnload(w http.ResponseWriter, r *http.Request) error {
	var body wire.BulkUnloadRequest
	if err := edge.Decode(r, &body); err != nil {
		return err
	}
	if body.Models == nil {
		return httpapi.InvalidParam("models", "models is required")
	}
	for _, id := range body.Models {
		if err := httpapi.ValidModelID(id); err != nil {
			return err
		}
	}
	res, err := s.reg.BulkUnload(r.Context(), body.Models) // one durable write for all, before it returns
	if err != nil {
		return manageErr(err)
	}
	out := wire.BulkUnloadResult{Unloaded: res.Unloaded, NotFound: res.NotFound}
	if out.Unloaded == nil {
		out.Unloaded = []string{}
	}
	if out.NotFound == nil {
		out.NotFound = []string{}
	}
	return httpapi.WriteJSON(w, out)
}

// apply is register (the registry's Apply, or the runtime's for a startup
// config, whose models are recorded only once a management change touches
// them: CONTRACT.md persist.config-merge); its errors are *httpapi.Error values
// for the API. The --max-models cap is the runtime's, decided where the
// registration happens (runtime.Options.MaxModels): its refusal is 400
// too_many_models (CONTRACT.md err.max-models).
func (s *Server) apply(ctx context.Context, id string, spec runtime.ModelSpec,
	register func(context.Context, string, runtime.ModelSpec) (core.ModelStatus, error)) (core.ModelStatus, error) {
	st, err := register(ctx, id, spec)
	if err == nil || runtime.Committed(err) || registry.NotDurable(err) {
		s.created.Note(id, time.Now())
	}
	var ce *runtime.CapError
	if errors.As(err, &ce) {
		return st, &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "too_many_models", Message: ce.Error(), Err: err}
	}
	var ne *runtime.NameError
	if errors.As(err, &ne) { // a name another model holds (CONTRACT.md names.alias-conflict)
		return st, &httpapi.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "alias_conflict", Param: ne.Field,
			Message: ne.Error(), Err: err}
	}
	if err != nil {
		return st, manageErr(err)
	}
	return st, nil
}

// manageErr maps a management operation's error for the API: a change
// that is live but not durable is 500 internal_error (CONTRACT.md
// persist.durable-before-200), an *httpapi.Error stays as it is, and a runtime
// error goes through its code.
func manageErr(err error) error {
	var e *httpapi.Error
	switch {
	case registry.NotDurable(err):
		return notDurable(err)
	case errors.As(err, &e):
		return e
	}
	return httpapi.FromRuntime(err)
}
