package oip

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// TestScope: exactly /v2 and the paths under /v2/ carry the protocol's
// error shape (CONTRACT.md oip.error-shape); /v2x and /v1 keep the API's.
func TestScope(t *testing.T) {
	for path, want := range map[string]bool{"/v2": true, "/v2/": true, "/v2/models/m/infer": true, "/v2/health/live": true,
		"/v2x": false, "/v1/models": false, "/": false, "/v1/v2/": false} {
		var got bool
		Scope(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = httpapi.ShapeFrom(r.Context()) != nil
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
		if got != want {
			t.Errorf("%s: in the protocol's scope %v, want %v", path, got, want)
		}
	}
}

// TestWriteError: the status, the message as {"error": msg}, the type and
// code headers, and no code header for an error without one.
func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, &httpapi.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "busy_here", Message: "ignored"}, "sent")
	var body ErrorWire
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != "sent" || w.Code != http.StatusConflict ||
		w.Header().Get(ErrorTypeHeader) != "invalid_request_error" || w.Header().Get(ErrorCodeHeader) != "busy_here" {
		t.Fatalf("%d %v %s (%v)", w.Code, w.Header(), w.Body, err)
	}
	w = httptest.NewRecorder()
	WriteError(w, &httpapi.Error{Status: http.StatusNotFound, Type: "not_found_error"}, "gone")
	if _, ok := w.Header()[ErrorCodeHeader]; ok || w.Code != http.StatusNotFound {
		t.Fatalf("no code: %d %v", w.Code, w.Header())
	}
}
