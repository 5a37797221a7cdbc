package auth

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The guards' HTTP-level tests, with the server's routes and error
// writer, are package server's (mw_auth_test.go); these pin what needs the
// clock or the session table. Sign-in bodies go through the server's own
// strict decoder (edge.Decode) here too.

// writeErr writes an *Error's status, as the server's writer would.
func writeErr(w http.ResponseWriter, _ *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError}
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(e.Message))
}

// keyed is the authorization of a server with both keys, management on,
// its clock at *now.
func keyed(now *time.Time) *Auth {
	return New(Config{APIKey: "k-api", ManagementKey: "k-mgmt", Management: true, WriteError: writeErr,
		Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return *now }})
}

// signInAt posts body to a's sign-in with the same-origin proof.
func signInAt(a *Auth, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/v1/ui/session", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(uiHeader, "1")
	rec := httptest.NewRecorder()
	if err := a.HandleSignIn(rec, req); err != nil {
		writeErr(rec, req, err)
	}
	return rec
}

// TestSignInRate: failed sign-ins are limited for the whole server: a
// burst of them is 401, the next attempt 429 with Retry-After, even with
// the right key, and a second later a sign-in succeeds (CONTRACT.md
// ui.sign-in-rate).
func TestSignInRate(t *testing.T) {
	now := time.Unix(1e9, 0)
	a := keyed(&now)
	burst := a.failures.Burst()
	if burst != (DefaultSignInLimit+59)/60 {
		t.Fatalf("burst %d for the default limit", burst)
	}
	for i := range burst {
		if rec := signInAt(a, `{"key":"wrong"}`); rec.Code != 401 {
			t.Fatalf("failure %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := signInAt(a, `{"key":"k-mgmt"}`)
	if rec.Code != 429 || rec.Header().Get("Retry-After") == "" {
		t.Errorf("over the limit: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	now = now.Add(time.Second)
	if rec := signInAt(a, `{"key":"k-mgmt"}`); rec.Code != 200 {
		t.Errorf("a second later: %d %s", rec.Code, rec.Body)
	}
	// A successful sign-in gives its token back: the budget is intact.
	for range burst {
		if rec := signInAt(a, `{"key":"k-api"}`); rec.Code != 200 {
			t.Fatalf("a good sign-in counted as a failure: %d", rec.Code)
		}
	}
}

// TestSignInRateConcurrent: concurrent failures never pass the limit
// together: with the clock stopped, exactly a burst of them is 401 and the
// rest 429 (CONTRACT.md ui.sign-in-rate).
func TestSignInRateConcurrent(t *testing.T) {
	now := time.Unix(1e9, 0)
	a := keyed(&now)
	burst := a.failures.Burst()
	const n = 40
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { codes <- signInAt(a, `{"key":"wrong"}`).Code })
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[401] != burst || count[429] != n-burst {
		t.Fatalf("codes %v, want %d×401 and %d×429", count, burst, n-burst)
	}
}

// TestSignOutRemovesSession: sign-out deletes the cookie's session from the
// table, and only that one (CONTRACT.md ui.sign-out).
func TestSignOutRemovesSession(t *testing.T) {
	now := time.Unix(1e9, 0)
	a := keyed(&now)
	var cookies []*http.Cookie
	for range 2 {
		rec := signInAt(a, `{"key":"k-mgmt"}`)
		if rec.Code != 200 {
			t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
		}
		cookies = append(cookies, rec.Result().Cookies()[0])
	}
	req := httptest.NewRequest("DELETE", "/v1/ui/session", nil)
	req.Header.Set(uiHeader, "1")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookies[0].Value})
	if err := a.HandleSignOut(httptest.NewRecorder(), req); err != nil {
		t.Fatal(err)
	}
	if n := a.sessions.size(); n != 1 {
		t.Errorf("%d sessions left, want 1", n)
	}
	if a.sessions.lookup(cookies[0].Value) != scopeNone || a.sessions.lookup(cookies[1].Value) != scopeManage {
		t.Error("sign-out removed the wrong session")
	}
}

// TestSessionTable: sessions expire after the TTL and the table holds at
// most max per scope, evicting that scope's oldest (CONTRACT.md
// ui.session-lifetime).
func TestSessionTable(t *testing.T) {
	now := time.Unix(1e9, 0)
	tab := newSessionTable(time.Hour, 3, func() time.Time { return now })
	a, _, _ := tab.create(scopeAPI)
	now = now.Add(30 * time.Minute)
	b, _, _ := tab.create(scopeManage)
	if tab.lookup(a) != scopeAPI || tab.lookup(b) != scopeManage || tab.lookup("x") != scopeNone {
		t.Fatal("lookup")
	}
	now = now.Add(30 * time.Minute) // a's hour is up
	if tab.lookup(a) != scopeNone || tab.lookup(b) != scopeManage {
		t.Fatal("a outlived its TTL")
	}
	c, _, _ := tab.create(scopeAPI)
	d, _, _ := tab.create(scopeAPI)
	e, _, _ := tab.create(scopeAPI)
	f, _, _ := tab.create(scopeAPI) // the API pool is full: c, its oldest, goes; b, a management session, stays
	if tab.size() != 4 || tab.lookup(b) != scopeManage || tab.lookup(c) != scopeNone || tab.lookup(d) == scopeNone || tab.lookup(e) == scopeNone || tab.lookup(f) == scopeNone {
		t.Fatalf("eviction: size %d", tab.size())
	}
	tab.remove(d)
	if tab.lookup(d) != scopeNone || tab.size() != 3 {
		t.Fatal("remove")
	}
	// Sign-ins with the API key never evict a management session
	// (1,001 of them did, when the pool was shared).
	for range 1001 {
		if _, _, err := tab.create(scopeAPI); err != nil {
			t.Fatal(err)
		}
	}
	if tab.lookup(b) != scopeManage {
		t.Fatal("API-key sign-ins evicted the management session")
	}
}

// guarded is the guard g of a around a handler that answers 200.
func guarded(a *Auth, g func() func(http.Handler) http.Handler) http.Handler {
	return a.Authenticate(g()(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
}

// sessionOf signs in to a with key and returns the session's token.
func sessionOf(t *testing.T, a *Auth, key string) string {
	t.Helper()
	rec := signInAt(a, `{"key":"`+key+`"}`)
	if rec.Code != 200 {
		t.Fatalf("sign-in with %s: %d %s", key, rec.Code, rec.Body)
	}
	return rec.Result().Cookies()[0].Value
}

// TestGuards: who passes which guard (CONTRACT.md err.auth,
// err.permission, ui.api-key-only, ui.session-scope, ui.same-origin,
// ui.auth-header): the API key reads but never manages, sessions count on
// the dashboard's routes only, a session's state-changing request needs
// the same-origin proof, and a repeated Authorization header is 400
// (edgemutants auth-*, session-origin-proof-skipped,
// same-origin-foreign-accepted).
func TestGuards(t *testing.T) {
	now := time.Unix(1e9, 0)
	a := keyed(&now)
	api, mgmt := sessionOf(t, a, "k-api"), sessionOf(t, a, "k-mgmt")
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	cookie := func(tok string) []string { return []string{"Cookie", sessionCookie + "=" + tok} }
	proof := []string{uiHeader, "1"}
	ws := func(protocols string) []string {
		return []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Protocol", protocols}
	}
	cases := []struct {
		name   string
		guard  func() func(http.Handler) http.Handler
		method string
		hdr    []string
		want   int
	}{
		{"no key reads", a.APIRead, "GET", nil, 401},
		{"API key reads", a.APIRead, "GET", bearer("k-api"), 200},
		{"wrong key reads", a.APIRead, "GET", bearer("nope"), 401},
		{"API key manages", a.APIManage, "POST", bearer("k-api"), 401},
		{"API key manages from the dashboard", a.DashboardManage, "POST", bearer("k-api"), 401},
		{"management key manages", a.APIManage, "POST", bearer("k-mgmt"), 200},
		{"API session on an API route", a.APIRead, "GET", cookie(api), 401},
		{"management session on a management-key-only route", a.APIManage, "POST", append(cookie(mgmt), proof...), 401},
		{"API session on the dashboard's reads", a.DashboardRead, "GET", cookie(api), 200},
		{"API session manages", a.DashboardManage, "POST", append(cookie(api), proof...), 401},
		{"management session manages", a.DashboardManage, "POST", append(cookie(mgmt), proof...), 200},
		{"management session POST without proof", a.DashboardManage, "POST", cookie(mgmt), 403},
		{"management session PUT without proof", a.DashboardManage, "PUT", cookie(mgmt), 403},
		{"management session DELETE without proof", a.DashboardManage, "DELETE", cookie(mgmt), 403},
		{"management session with a foreign Origin", a.DashboardManage, "POST",
			append(cookie(mgmt), uiHeader, "1", "Origin", "http://evil.example"), 403},
		{"management session with its own Origin", a.DashboardManage, "POST",
			append(cookie(mgmt), "Origin", "http://127.0.0.1"), 200},
		{"repeated Authorization", a.APIRead, "GET", append(bearer("k-api"), bearer("k-api")...), 400},
		{"not Bearer", a.APIRead, "GET", []string{"Authorization", "Basic k-api"}, 400},
		// A WebSocket handshake's key subprotocol counts as the Bearer
		// token (live.subprotocol); only on an upgrade.
		{"subprotocol key on a WebSocket handshake", a.APIRead, "GET", ws("realtime, openai-insecure-api-key.k-api"), 200},
		{"subprotocol key in its own header", a.APIRead, "GET", append(ws("realtime"), "Sec-WebSocket-Protocol", "openai-insecure-api-key.k-api"), 200},
		{"wrong subprotocol key", a.APIRead, "GET", ws("realtime, openai-insecure-api-key.nope"), 401},
		{"subprotocol management key manages", a.APIManage, "GET", ws("openai-insecure-api-key.k-mgmt"), 200},
		{"subprotocol API key manages", a.APIManage, "GET", ws("openai-insecure-api-key.k-api"), 401},
		{"two subprotocol keys", a.APIRead, "GET", ws("openai-insecure-api-key.k-api, openai-insecure-api-key.k-api"), 400},
		{"empty subprotocol key", a.APIRead, "GET", ws("realtime, openai-insecure-api-key."), 400},
		{"subprotocol key without an upgrade", a.APIRead, "GET", []string{"Sec-WebSocket-Protocol", "openai-insecure-api-key.k-api"}, 401},
		{"Authorization beside a subprotocol key", a.APIRead, "GET", append(ws("openai-insecure-api-key.nope"), bearer("k-api")...), 200},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, "/x", nil)
		req.Host = "127.0.0.1"
		for i := 0; i+1 < len(c.hdr); i += 2 {
			req.Header.Add(c.hdr[i], c.hdr[i+1])
		}
		rec := httptest.NewRecorder()
		guarded(a, c.guard).ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d, want %d: %s", c.name, rec.Code, c.want, rec.Body)
		}
	}
	// Without --ui-management nobody manages, not even with the key.
	off := New(Config{APIKey: "k-api", ManagementKey: "k-mgmt", WriteError: writeErr,
		Log: slog.New(slog.DiscardHandler)})
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("Authorization", "Bearer k-mgmt")
	rec := httptest.NewRecorder()
	guarded(off, off.APIManage).ServeHTTP(rec, req)
	if rec.Code != 403 {
		t.Errorf("management without --ui-management: %d", rec.Code)
	}
	// Sign-in needs the proof too (login CSRF; edgemutants sign-in-no-proof).
	req = httptest.NewRequest("POST", "/v1/ui/session", strings.NewReader(`{"key":"k-mgmt"}`))
	if err := a.HandleSignIn(httptest.NewRecorder(), req); err != errNoProof {
		t.Errorf("sign-in without proof: %v", err)
	}
}
