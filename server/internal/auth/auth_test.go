package auth

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// The guards' HTTP-level tests, with the server's decoder, routes and
// error writer, are package server's (mw_auth_test.go); these pin what
// needs the clock or the session table.

// decodeJSON stands in for the server's strict decoder: unknown fields are
// 400, a body over its MaxBytesReader 413.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Message: "too large"}
		}
		return httpapi.Invalid("invalid JSON body: %v", err)
	}
	return nil
}

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
	return New(Config{APIKey: "k-api", ManagementKey: "k-mgmt", Management: true, WriteError: writeErr, Decode: decodeJSON,
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
// most max, evicting the oldest (CONTRACT.md ui.session-lifetime).
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
	e, _, _ := tab.create(scopeAPI) // full: b, the oldest, goes
	if tab.size() != 3 || tab.lookup(b) != scopeNone || tab.lookup(c) == scopeNone || tab.lookup(d) == scopeNone || tab.lookup(e) == scopeNone {
		t.Fatalf("eviction: size %d", tab.size())
	}
	tab.remove(d)
	if tab.lookup(d) != scopeNone || tab.size() != 2 {
		t.Fatal("remove")
	}
}
