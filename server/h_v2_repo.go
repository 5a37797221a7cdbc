package server

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/core"
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

// handleV2Index answers POST /v2/repository/index with an optional body
// {"ready": bool}: every registered model in registration order (or only
// those ready now) as {"name","version","state","reason"}, from one status
// snapshot.
func (s *Server) handleV2Index(w http.ResponseWriter, r *http.Request) error {
	var req V2RepositoryIndexRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	out := []V2RepositoryModel{}
	for _, st := range s.rt.Status() {
		state, reason := v2State(st)
		if req.Ready && state != "READY" {
			continue
		}
		out = append(out, V2RepositoryModel{Name: st.ID, Version: strconv.FormatUint(st.ConfigVersion, 10), State: state, Reason: reason})
	}
	return writeJSON(w, out)
}

// decodeOptional decodes a JSON body that may be empty ({} is implied):
// like every JSON route it needs Content-Type application/json (415
// without, CONTRACT.md err.content-type), and it is decoded strictly.
func decodeOptional(r *http.Request, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	b, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return decodeJSONStrict(b, v)
}

// repositoryRequest checks the optional body of a load or unload: Triton's
// parameters (config, files, unload_dependents) would change what is
// loaded, which is PUT /v1/models/{id}'s job, so any is refused.
func repositoryRequest(r *http.Request) error {
	var req V2RepositoryRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	if err := checkParams("repository", req.Parameters); err != nil {
		return err
	}
	return nil
}

// handleV2Load answers POST /v2/repository/models/{m}/load: POST
// /v1/models/{id}/load's manager; 200 with an empty body once loaded.
func (s *Server) handleV2Load(w http.ResponseWriter, r *http.Request) error {
	id, err := v2ModelID(r)
	if err != nil {
		return err
	}
	if err := repositoryRequest(r); err != nil {
		return err
	}
	if _, err := s.reg.Load(r.Context(), id); err != nil { // durable before it returns (CONTRACT.md persist.durable-before-200)
		return manageErr(err)
	}
	return v2True(w)
}

// handleV2Unload answers POST /v2/repository/models/{m}/unload: POST
// /v1/models/{id}/unload's manager, the same barrier (CONTRACT.md
// oip.repo-barrier); 200 with an empty body after the teardown.
func (s *Server) handleV2Unload(w http.ResponseWriter, r *http.Request) error {
	id, err := v2ModelID(r)
	if err != nil {
		return err
	}
	if err := repositoryRequest(r); err != nil {
		return err
	}
	if _, err := s.reg.Unload(r.Context(), id); err != nil { // durable before it returns (CONTRACT.md persist.durable-before-200)
		return manageErr(err)
	}
	return v2True(w)
}
