package server

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// handleHealth answers GET /healthz: the process is up.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, map[string]string{"status": "ok"})
}

// handleReady answers GET /readyz: ready while listening and not shutting
// down; 503 shutting_down from the moment shutdown begins (CONTRACT.md
// time.shutdown-new-submission).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	if s.stopping.Load() || s.rt.ShuttingDown() {
		return FromCode(core.CodeShuttingDown, "server is shutting down", nil)
	}
	return writeJSON(w, map[string]string{"status": "ready"})
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
			list.Data = append(list.Data, aliasEntry(list.Data[i], a))
		}
	}
	return writeJSON(w, list)
}

// aliasEntry is the list entry of alias a of model m: m's object under
// the alias's name, saying which model it names.
func aliasEntry(m Model, a string) Model {
	m.AliasOf, m.ID, m.Aliases = m.ID, a, []string{}
	return m
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
		return httpapi.ModelNotFound(fromRuntime(err)) // OpenAI's models.retrieve: param model (err.not-found)
	}
	if alias { // an OpenAI client's models.retrieve("whisper-1")
		return writeJSON(w, aliasEntry(s.model(st), id))
	}
	return writeJSON(w, s.model(st))
}

// modelID returns the {id} of the route, validated.
func modelID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if err := validModelID(id); err != nil {
		return "", err
	}
	return id, nil
}

// fromRuntime maps a runtime error to the API error through its core code
// (runtime.CodeOf, then FromCode: the one mapping).
func fromRuntime(err error) *Error {
	msg := err.Error()
	var e *runtime.Error
	if errors.As(err, &e) && e.Msg != "" {
		msg = e.Msg
	}
	c := runtime.CodeOf(err)
	if c == core.CodeInvalid {
		msg = err.Error() // the cause says what is invalid
	}
	return FromCode(c, msg, err)
}
