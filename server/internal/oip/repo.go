package oip

import (
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/edge"
)

// Triton's model-repository extension mapped onto Sluice's management
// (CONTRACT.md oip.repo-*): the index is GET /v1/models's snapshot, load
// and unload are the same managers as POST /v1/models/{id}/load and
// /unload (the same barrier in the model's FIFO, the same durability with
// --state-dir), behind the same authorization.

// v2State is a model's state in the repository index.
func v2State(st core.ModelStatus) (state, reason string) {
	switch st.State {
	case core.Ready:
		return "READY", ""
	case core.Loading, core.Reconfiguring:
		return "LOADING", ""
	case core.Unloading:
		return "UNLOADING", ""
	}
	if st.LoadFailures > 0 {
		return "UNAVAILABLE", strconv.Itoa(st.LoadFailures) + " failed load(s) since the last success"
	}
	return "UNAVAILABLE", "unloaded"
}

// decodeOptional decodes the optional body of a repository call (index,
// load, unload): Triton's clients send these without a body and without a
// Content-Type, so a request without one is read as JSON (CONTRACT.md
// oip.repo-index, oip.repo-manage); a Content-Type that is not JSON is
// still refused (415), as on every JSON route (err.content-type).
func (p *Handlers) decodeOptional(r *http.Request, v any) error {
	if r.Header.Get("Content-Type") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Content-Type", "application/json")
	}
	return edge.DecodeOptional(r, v)
}

// Index answers POST /v2/repository/index with an optional body
// {"ready": bool}: every registered model in registration order (or only
// those ready now) as {"name","version","state","reason"}, from one status
// snapshot.
func (p *Handlers) Index(w http.ResponseWriter, r *http.Request) error {
	var req V2RepositoryIndexRequest
	if err := p.decodeOptional(r, &req); err != nil {
		return err
	}
	out := []V2RepositoryModel{}
	for _, st := range p.h.Runtime.Status() {
		state, reason := v2State(st)
		if req.Ready && state != "READY" {
			continue
		}
		out = append(out, V2RepositoryModel{Name: st.ID, Version: strconv.FormatUint(st.ConfigVersion, 10), State: state, Reason: reason})
	}
	return writeJSON(w, out)
}

// repositoryRequest checks the optional body of a load or unload: Triton's
// parameters (config, files, unload_dependents) would change what is
// loaded, which is PUT /v1/models/{id}'s job, so any is refused.
func (p *Handlers) repositoryRequest(r *http.Request) error {
	var req V2RepositoryRequest
	if err := p.decodeOptional(r, &req); err != nil {
		return err
	}
	if err := checkParams("repository", req.Parameters); err != nil {
		return err
	}
	return nil
}

// Load answers POST /v2/repository/models/{m}/load: POST
// /v1/models/{id}/load's manager; 200 with an empty body once loaded.
func (p *Handlers) Load(w http.ResponseWriter, r *http.Request) error {
	id, err := p.h.ModelID(r)
	if err != nil {
		return err
	}
	if err := p.repositoryRequest(r); err != nil {
		return err
	}
	if err := p.h.Load(r.Context(), id); err != nil { // durable before it returns (CONTRACT.md persist.durable-before-200)
		return err
	}
	return v2Empty(w)
}

// Unload answers POST /v2/repository/models/{m}/unload: POST
// /v1/models/{id}/unload's manager, the same barrier (CONTRACT.md
// oip.repo-barrier); 200 with an empty body after the teardown.
func (p *Handlers) Unload(w http.ResponseWriter, r *http.Request) error {
	id, err := p.h.ModelID(r)
	if err != nil {
		return err
	}
	if err := p.repositoryRequest(r); err != nil {
		return err
	}
	if err := p.h.Unload(r.Context(), id); err != nil { // durable before it returns (CONTRACT.md persist.durable-before-200)
		return err
	}
	return v2Empty(w)
}

// v2Empty answers a repository call with 200 and an empty body.
func v2Empty(w http.ResponseWriter) error {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	return nil
}
