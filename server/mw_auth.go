package server

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func sameKey(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// requireAPIKey refuses requests without the API key (401), except health
// and readiness probes; the management key, when set, is accepted too. An
// empty API key disables the check.
func requireAPIKey(key, managementKey string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if key == "" {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
				next.ServeHTTP(w, r)
				return
			}
			if got := bearer(r); !sameKey(got, key) && (managementKey == "" || !sameKey(got, managementKey)) {
				writeError(w, r, Unauthorized("missing or wrong API key"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// requireManagement guards management endpoints: 403 permission_error unless
// management is enabled; with a management key, 401 unless it is presented.
func requireManagement(enabled bool, key string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !enabled {
				writeError(w, r, Forbidden("management is disabled: start the server with --ui-management"))
				return
			}
			if key != "" && !sameKey(bearer(r), key) {
				writeError(w, r, Unauthorized("missing or wrong management key"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
