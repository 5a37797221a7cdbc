package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// Model is the model object of GET /v1/models, GET /v1/models/{id}, PUT
// and load answers (server/internal/wire).
type Model = wire.Model

// ModelList is the answer of GET /v1/models.
type ModelList = wire.ModelList

// InferRequest is the body of POST /v1/models/{id}/infer.
type InferRequest = wire.InferRequest

// model is the model object of GET /v1/models, GET /v1/models/{id}, PUT and
// load answers: wire.ModelOf with its created.
func (s *Server) model(st core.ModelStatus) Model {
	m := wire.ModelOf(st)
	m.Created = s.created.Of(st.ID)
	return m
}

// handleHealth answers GET /healthz: the process is up.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, map[string]string{"status": "ok"})
}

// handleReady answers GET /readyz: ready while listening and not shutting
// down; 503 shutting_down from the moment shutdown begins (CONTRACT.md
// time.shutdown-new-submission).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	if s.stopping.Load() || s.rt.ShuttingDown() {
		return httpapi.FromCode(core.CodeShuttingDown, "server is shutting down", nil)
	}
	return httpapi.WriteJSON(w, map[string]string{"status": "ready"})
}

// handleListModels answers GET /v1/models from one atomic snapshot of every
// model (CONTRACT.md ops.*.status).
func (s *Server) handleListModels(w http.ResponseWriter, r *http.Request) error {
	st := s.rt.Status()
	list := ModelList{Object: "list", Data: make([]Model, len(st))}
	for i := range st {
		list.Data[i] = s.model(st[i])
	}
	for i := range st { // the aliases, from the same snapshot (CONTRACT.md names.alias-list)
		for _, a := range list.Data[i].Aliases {
			list.Data = append(list.Data, wire.AliasEntry(list.Data[i], a))
		}
	}
	return httpapi.WriteJSON(w, list)
}

// handleGetModel answers GET /v1/models/{id}, or 404; an alias answers
// its entry of the list (the model's object under the alias, alias_of
// naming the model: CONTRACT.md names.alias-list).
func (s *Server) handleGetModel(w http.ResponseWriter, r *http.Request) error {
	id, err := modelID(r)
	if err != nil {
		return err
	}
	canon, alias := id, false
	if c, ok := s.rt.Resolve(id); ok && c != id {
		canon, alias = c, true
	}
	st, err := s.rt.StatusOf(canon)
	if err != nil {
		return httpapi.FromRuntimeModel(err) // OpenAI's models.retrieve: param model (err.not-found)
	}
	if alias { // an OpenAI client's models.retrieve("whisper-1")
		return httpapi.WriteJSON(w, wire.AliasEntry(s.model(st), id))
	}
	return httpapi.WriteJSON(w, s.model(st))
}

// modelID returns the {id} of the route, validated.
func modelID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if err := httpapi.ValidModelID(id); err != nil {
		return "", err
	}
	return id, nil
}
