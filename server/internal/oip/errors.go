package oip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Error headers of a /v2 error answer: the protocol's body carries only a
// message, so the machine-readable type and code travel beside it.
const (
	ErrorTypeHeader = "Sluice-Error-Type"
	ErrorCodeHeader = "Sluice-Error-Code"
)

// Prefix is the path under which the protocol's routes live.
const Prefix = "/v2"

// in reports whether r is a request of the protocol's routes.
func in(r *http.Request) bool {
	return r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/")
}

// Scope is the middleware that marks the protocol's requests: under
// Prefix, every error (the edge's refusals included: keys, Host, body
// limits, unknown routes) is written by WriteError in the protocol's shape
// (CONTRACT.md oip.error-shape). The server puts it outside every
// middleware that can refuse.
func Scope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if in(r) {
			r = r.WithContext(httpapi.WithShape(r.Context(), WriteError))
		}
		next.ServeHTTP(w, r)
	})
}

// WriteError writes e as {"error": msg} with its status, Retry-After (set
// by the caller) and the type and code headers.
func WriteError(w http.ResponseWriter, e *httpapi.Error, msg string) {
	h := w.Header()
	h.Set(ErrorTypeHeader, e.Type)
	if e.Code != "" {
		h.Set(ErrorCodeHeader, e.Code)
	}
	body := ErrorWire{Error: msg}
	var nr notReady
	if errors.As(e, &nr) { // a health question's false (v2False)
		f := false
		body.Name, body.Ready = nr.name, &f
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// ErrorWire is the protocol's error body, {"error": "<message>"}; a health
// question's false carries its answer beside it, {"ready": false} and for
// a model its "name" (CONTRACT.md oip.ready, oip.model-ready).
type ErrorWire struct {
	Name  string `json:"name,omitempty"`
	Ready *bool  `json:"ready,omitempty"`
	Error string `json:"error"`
}

// writeJSON writes v with status 200.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return fmt.Errorf("oip: encode response: %w", err)
	}
	return nil
}

// taskName names a task in a message ("task-less" for none).
func taskName(t string) string {
	if t == "" {
		return "task-less"
	}
	return t
}
