package server

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The dashboard session cookie on the wire (internal/auth): its name, the
// length of its token (32 random bytes, base64url unpadded) and its
// lifetime (CONTRACT.md ui.session-lifetime).
const (
	sessionCookie = "sluice_session"
	tokenLen      = 43
	sessionTTL    = 12 * time.Hour
)

// keyed is a server with --api-key k-api and --management-key k-mgmt (or
// only the API key) and a ready fixture model m.
func keyed(t *testing.T, mgmt bool) *tserver {
	ts := newServer(t, func(c *Config) {
		c.APIKey = "k-api"
		if mgmt {
			c.ManagementKey = "k-mgmt"
		}
	})
	if mgmt {
		ts.must(200, "PUT", "/v1/models/m", `{"engine":"fixture","slots":1}`, "Authorization", "Bearer k-mgmt")
	}
	return ts
}

// send serves one request through the handler with the given header lines
// (repeated names are sent repeatedly).
func send(ts *tserver, req *http.Request, hdr ...string) *httptest.ResponseRecorder {
	req.Host = "127.0.0.1" // CONTRACT.md err.host: httptest's example.com is not an allowed host
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0 {
		req.Header.Set("Content-Type", "application/json") // err.content-type
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	ts.s.Handler().ServeHTTP(rec, req)
	return rec
}

func errTypeOf(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	return resp{status: rec.Code, body: rec.Body.Bytes()}.errType(t)
}

// signIn exchanges key for a session cookie.
func signIn(t *testing.T, ts *tserver, key string) *http.Cookie {
	t.Helper()
	rec := send(ts, httptest.NewRequest("POST", "/v1/ui/session", strings.NewReader(`{"key":"`+key+`"}`)),
		"Content-Type", "application/json", "X-Sluice-UI", "1")
	if rec.Code != 200 {
		t.Fatalf("sign-in with %q: %d %s", key, rec.Code, rec.Body)
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	t.Fatalf("sign-in set no session cookie: %v", rec.Header())
	return nil
}

func withCookie(req *http.Request, c *http.Cookie) *http.Request {
	req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	return req
}

// TestAuth: the keys as Bearer tokens (CONTRACT.md err.auth,
// err.permission).
func TestAuth(t *testing.T) {
	ts := keyed(t, true)
	for _, c := range []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/healthz", "", 200}, {"GET", "/readyz", "", 200}, {"GET", "/v1/models", "", 401},
		{"GET", "/v1/models", "Bearer k-api", 200}, {"GET", "/v1/models", "bearer k-api", 200},
		{"GET", "/v1/models", "Bearer k2", 401}, {"GET", "/v1/models", "Bearer k-mgmt", 200},
		{"GET", "/no/such/route", "", 401}, {"GET", "/no/such/route", "Bearer k-api", 404},
		{"POST", "/v1/models/m/load", "Bearer k-api", 401}, {"POST", "/v1/models/m/load", "Bearer k-mgmt", 200},
		// The inference protocol's repository load and unload are management
		// (oip.repo-auth); its index is a read. A body-less request needs no
		// Content-Type (oip.repo-manage).
		{"POST", "/v2/repository/models/m/load", "Bearer k-api", 401}, {"POST", "/v2/repository/models/m/unload", "Bearer k-api", 401},
		{"POST", "/v2/repository/models/m/load", "Bearer k-mgmt", 200}, {"POST", "/v2/repository/index", "Bearer k-api", 200},
		{"GET", "/", "", 200}, // the shell is open (ui.shell)
		// The models root is management too (edgemutants auth-models-root-open).
		{"PUT", "/v1/settings/models-root", "Bearer k-api", 401},
	} {
		var hdr []string
		if c.auth != "" {
			hdr = []string{"Authorization", c.auth}
		}
		if rec := send(ts, httptest.NewRequest(c.method, c.path, nil), hdr...); rec.Code != c.want {
			t.Errorf("%s %s %q: %d, want %d: %s", c.method, c.path, c.auth, rec.Code, c.want, rec.Body)
		}
	}
	off := newServer(t, func(c *Config) { c.UIManagement = false })
	if rec := send(off, httptest.NewRequest("POST", "/v1/models/m/load", nil)); rec.Code != 403 {
		t.Errorf("management disabled: %d", rec.Code)
	}
}

// TestAuthHeaderShape: a repeated Authorization header, or one that is not
// exactly one Bearer token, is 400 (CONTRACT.md ui.auth-header). On the old
// code the first of two headers won and the others were 401.
func TestAuthHeaderShape(t *testing.T) {
	ts := keyed(t, true)
	for _, hdr := range [][]string{
		{"Authorization", "Bearer k-api", "Authorization", "Bearer k-api"},
		{"Authorization", "Bearer k-api", "Authorization", "Bearer wrong"},
		{"Authorization", "Basic azphcGk="}, {"Authorization", "Bearer"}, {"Authorization", "Bearer "},
		{"Authorization", "Bearer k-api extra"}, {"Authorization", "Bearer  k-api"}, {"Authorization", "k-api"},
	} {
		rec := send(ts, httptest.NewRequest("GET", "/v1/models", nil), hdr...)
		if rec.Code != 400 || errTypeOf(t, rec) != "invalid_request_error" {
			t.Errorf("%q: %d %s, want 400 invalid_request_error", hdr, rec.Code, rec.Body)
		}
	}
}

// TestAPIKeyOnlyCannotManage: --api-key without --management-key refuses
// every management request with 403 and says so once at start (CONTRACT.md
// ui.api-key-only). On the old code the API key could manage.
func TestAPIKeyOnlyCannotManage(t *testing.T) {
	ts := keyed(t, false)
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/models/m", `{"engine":"fixture"}`}, {"POST", "/v1/models/m/load", ""},
		{"POST", "/v1/models/unload", `{"models":["m"]}`}, {"GET", "/v1/fixture/gates", ""},
	} {
		rec := send(ts, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)),
			"Authorization", "Bearer k-api", "Content-Type", "application/json")
		if rec.Code != 403 || !strings.Contains(rec.Body.String(), "management needs --management-key when --api-key is set") {
			t.Errorf("%s %s: %d %s", c.method, c.path, rec.Code, rec.Body)
		}
	}
	cookie := signIn(t, ts, "k-api")
	rec := send(ts, withCookie(httptest.NewRequest("GET", "/v1/ui/config", nil), cookie))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"can_manage":false`) ||
		!strings.Contains(rec.Body.String(), "management needs --management-key") {
		t.Errorf("config: %d %s", rec.Code, rec.Body)
	}
	if n := strings.Count(ts.logs.String(), APIKeyOnlyWarning); n != 1 || !strings.Contains(ts.logs.String(), "level=WARN") {
		t.Errorf("the warning is logged %d times, want once at WARN:\n%s", n, ts.logs)
	}
	if n := strings.Count(newServer(t, nil).logs.String(), APIKeyOnlyWarning); n != 0 {
		t.Errorf("warned without --api-key")
	}
}

// TestSessionScope: a session is accepted on the dashboard's routes only,
// and a management one on the dashboard's management routes too
// (CONTRACT.md ui.sign-in, ui.session-scope).
func TestSessionScope(t *testing.T) {
	ts := keyed(t, true)
	api, mgmt := signIn(t, ts, "k-api"), signIn(t, ts, "k-mgmt")
	if !api.HttpOnly || api.SameSite != http.SameSiteStrictMode || api.Path != "/" || api.Secure || len(api.Value) != tokenLen ||
		api.MaxAge != int(sessionTTL/time.Second) {
		t.Errorf("cookie attributes: %+v", api)
	}
	if api.Value == mgmt.Value {
		t.Fatal("two sign-ins, one token")
	}
	proof := []string{"X-Sluice-UI", "1"}
	for _, c := range []struct {
		method, path string
		cookie       *http.Cookie
		want         int
	}{
		{"GET", "/v1/models", api, 200}, {"GET", "/v1/catalogue", api, 200}, {"GET", "/v1/ui/config", api, 200},
		{"GET", "/v1/models/m", api, 401}, {"POST", "/v1/models/m/infer", api, 401}, {"GET", "/metrics", api, 401},
		{"POST", "/v1/models/m/infer", mgmt, 401}, {"POST", "/v1/models/m/load", api, 401},
		{"GET", "/v1/models/m/spec", api, 401}, {"GET", "/v1/models/m/spec", mgmt, 200},
		{"POST", "/v1/models/m/unload", mgmt, 200}, {"POST", "/v1/models/m/load", mgmt, 200},
		{"POST", "/v1/models/unload", mgmt, 401}, {"GET", "/v1/fixture/gates", mgmt, 401},
		{"GET", "/v1/models", &http.Cookie{Name: sessionCookie, Value: strings.Repeat("A", tokenLen)}, 401},
	} {
		body := ""
		if c.method == "POST" {
			body = `{"input":{},"models":["m"]}`
			if strings.HasSuffix(c.path, "load") && c.path != "/v1/models/unload" {
				body = ""
			}
		}
		rec := send(ts, withCookie(httptest.NewRequest(c.method, c.path, strings.NewReader(body)), c.cookie),
			append([]string{"Content-Type", "application/json"}, proof...)...)
		if rec.Code != c.want {
			t.Errorf("%s %s with the %s session: %d, want %d: %s", c.method, c.path, c.cookie.Value[:4], rec.Code, c.want, rec.Body)
		}
	}
	rec := send(ts, withCookie(httptest.NewRequest("GET", "/v1/ui/config", nil), mgmt))
	if !strings.Contains(rec.Body.String(), `"can_manage":true`) || !strings.Contains(rec.Body.String(), `"session":"management"`) {
		t.Errorf("config of a management session: %s", rec.Body)
	}
	// Over TLS the cookie is Secure.
	req := httptest.NewRequest("POST", "/v1/ui/session", strings.NewReader(`{"key":"k-api"}`))
	req.TLS = &tls.ConnectionState{}
	if rec := send(ts, req, "X-Sluice-UI", "1"); rec.Code != 200 || !rec.Result().Cookies()[0].Secure {
		t.Errorf("sign-in over TLS: %d %v", rec.Code, rec.Header())
	}
}

// TestSessionSameOrigin: a session's state-changing request needs the
// X-Sluice-UI header or a same-origin Origin; a foreign Origin is refused
// even with the header (CONTRACT.md ui.same-origin).
func TestSessionSameOrigin(t *testing.T) {
	ts := keyed(t, true)
	mgmt := signIn(t, ts, "k-mgmt")
	for _, c := range []struct {
		hdr  []string
		want int
	}{
		{nil, 403}, {[]string{"X-Sluice-UI", "0"}, 403}, {[]string{"Origin", "http://evil.example"}, 403},
		{[]string{"Origin", "http://evil.example", "X-Sluice-UI", "1"}, 403}, {[]string{"Origin", "null"}, 403},
		{[]string{"Origin", "https://127.0.0.1"}, 403}, // the scheme counts
		{[]string{"Origin", "http://127.0.0.1"}, 200}, {[]string{"X-Sluice-UI", "1"}, 200},
	} {
		rec := send(ts, withCookie(httptest.NewRequest("POST", "/v1/models/m/load", nil), mgmt), c.hdr...)
		if rec.Code != c.want {
			t.Errorf("%q: %d, want %d: %s", c.hdr, rec.Code, c.want, rec.Body)
		}
	}
	// A Bearer request needs no proof; a read with a session neither.
	if rec := send(ts, httptest.NewRequest("POST", "/v1/models/m/load", nil), "Authorization", "Bearer k-mgmt"); rec.Code != 200 {
		t.Errorf("bearer: %d", rec.Code)
	}
	if rec := send(ts, withCookie(httptest.NewRequest("GET", "/v1/models", nil), mgmt)); rec.Code != 200 {
		t.Errorf("session read: %d", rec.Code)
	}
	// Sign-in and sign-out need it too.
	if rec := send(ts, httptest.NewRequest("POST", "/v1/ui/session", strings.NewReader(`{"key":"k-mgmt"}`))); rec.Code != 403 {
		t.Errorf("sign-in without proof: %d", rec.Code)
	}
	if rec := send(ts, withCookie(httptest.NewRequest("DELETE", "/v1/ui/session", nil), mgmt)); rec.Code != 403 {
		t.Errorf("sign-out without proof: %d", rec.Code)
	}
}

// TestSignOut: sign-out deletes the session and clears the cookie
// (CONTRACT.md ui.sign-out).
func TestSignOut(t *testing.T) {
	ts := keyed(t, true)
	a, b := signIn(t, ts, "k-mgmt"), signIn(t, ts, "k-mgmt")
	rec := send(ts, withCookie(httptest.NewRequest("DELETE", "/v1/ui/session", nil), a), "X-Sluice-UI", "1")
	if rec.Code != 200 || rec.Result().Cookies()[0].MaxAge >= 0 {
		t.Fatalf("sign-out: %d %v", rec.Code, rec.Header())
	}
	if rec := send(ts, withCookie(httptest.NewRequest("GET", "/v1/models", nil), a)); rec.Code != 401 {
		t.Errorf("a signed-out session still reads: %d", rec.Code)
	}
	if rec := send(ts, withCookie(httptest.NewRequest("GET", "/v1/models", nil), b)); rec.Code != 200 {
		t.Errorf("the other session was lost: %d", rec.Code)
	}
}

// TestSignInRefusals: a wrong key is 401 with one message whatever keys
// exist, and a sign-in body is bounded (CONTRACT.md ui.sign-in; the
// failure limit, ui.sign-in-rate, is internal/auth's TestSignInRate with a
// pinned clock: here the limit is too high to be reached).
func TestSignInRefusals(t *testing.T) {
	limit := func(c *Config) { c.SignInLimit = 60 * 100 }
	ts := newServer(t, func(c *Config) { limit(c); c.APIKey, c.ManagementKey = "k-api", "k-mgmt" })
	only := newServer(t, func(c *Config) { limit(c); c.ManagementKey = "k-mgmt" })
	try := func(ts *tserver, body string) *httptest.ResponseRecorder {
		return send(ts, httptest.NewRequest("POST", "/v1/ui/session", strings.NewReader(body)), "X-Sluice-UI", "1")
	}
	rec, other := try(ts, `{"key":"wrong"}`), try(only, `{"key":"wrong"}`)
	if rec.Code != 401 || other.Code != 401 {
		t.Fatalf("a wrong key: %d %s, %d %s", rec.Code, rec.Body, other.Code, other.Body)
	}
	if other.Body.String() != rec.Body.String() {
		t.Errorf("the refusal differs by the keys configured: %s vs %s", other.Body, rec.Body)
	}
	const maxKeyLen = 1024
	for _, body := range []string{`{"key":""}`, `{"key":"` + strings.Repeat("k", maxKeyLen+1) + `"}`, `{"key":1}`, `{"key":"k","x":1}`,
		`{"key":"` + strings.Repeat("k", 8<<10) + `"}`} {
		if rec := try(ts, body); rec.Code != 400 && rec.Code != 413 {
			t.Errorf("%.40s: %d, want 400/413", body, rec.Code)
		}
	}
	if rec := try(ts, `{"key":"k-mgmt"}`); rec.Code != 200 {
		t.Errorf("the right key after the refusals: %d %s", rec.Code, rec.Body)
	}
}

// A negative --sign-in-limit is refused at start, not read as the default.
func TestSignInLimitFlag(t *testing.T) {
	cfg := testConfig(t)
	cfg.SignInLimit = -1
	if _, err := New(cfg, Options{}); err == nil {
		t.Fatal("New accepted --sign-in-limit -1")
	}
}
