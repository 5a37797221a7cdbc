package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAuth(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	api := requireAPIKey("k1", "mk")(ok)
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/healthz", "", 200}, {"/readyz", "", 200}, {"/v1/models", "", 401},
		{"/v1/models", "Bearer k1", 200}, {"/v1/models", "bearer k1", 200}, {"/v1/models", "Bearer k2", 401},
		{"/v1/models", "Bearer mk", 200},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		api.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Fatalf("%s %q: %d", c.path, c.auth, rec.Code)
		}
	}
	for _, c := range []struct {
		enabled   bool
		key, auth string
		want      int
	}{
		{false, "", "", 403}, {true, "", "", 200}, {true, "m", "", 401}, {true, "m", "Bearer m", 200},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/models/a/load", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		requireManagement(c.enabled, c.key)(ok).ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Fatalf("%+v: %d %s", c, rec.Code, rec.Body)
		}
	}
}
