// Package auth is who may do what on the server (CONTRACT.md err.auth,
// err.permission, ui.*): the API key, the management key and dashboard
// sessions.
//
// A request proves itself with one "Authorization: Bearer TOKEN" header or,
// without one, with a dashboard session cookie (session.go). A WebSocket
// handshake may carry the key as the subprotocol
// "openai-insecure-api-key.KEY" instead (browsers cannot set headers on a
// WebSocket; OpenAI's browser clients send it so): it counts as the
// Bearer token (CONTRACT.md live.subprotocol). A Bearer
// token is accepted wherever its key is; a session only on the routes the
// dashboard itself calls (the server's router: the dashboard's
// reads, and for a session made with the management key the management
// routes its buttons use), never on inference; and a session's
// state-changing request also needs a same-origin proof, so a cookie alone
// never acts cross-site. Every protocol's management routes, the inference
// protocol's repository included, sit behind the same guards.
package auth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Error is the server's one error type (httpapi.Error).
type Error = httpapi.Error

// forbidden is a 403 permission_error (the server's Forbidden).
func forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Type: "permission_error", Message: fmt.Sprintf(format, args...)}
}

// unauthorized is a 401 for a missing or wrong key in OpenAI's shape: type
// invalid_request_error, code invalid_api_key (CONTRACT.md err.auth), which
// the OpenAI SDKs surface as their AuthenticationError (the server's
// Unauthorized).
func unauthorized(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: fmt.Sprintf(format, args...)}
}

// APIKeyOnlyWarning is logged once at start when --api-key is set without
// --management-key (CONTRACT.md ui.api-key-only).
const APIKeyOnlyWarning = "management needs --management-key when --api-key is set: every management request is refused (403)"

// uiHeader is the dashboard's same-origin proof: a custom header, which a
// cross-site form cannot send and a cross-site fetch cannot send without a
// CORS preflight that Sluice never grants.
const uiHeader = "X-Sluice-UI"

// DefaultSignInLimit is the default of Config.SignInLimit: failed sign-ins
// allowed a minute for the whole server, at most a second's worth of them
// at once; over it every sign-in is 429 (CONTRACT.md ui.sign-in-rate).
const DefaultSignInLimit = 300

const maxKeyLen = 1024 // a sign-in body's key; longer is 400

// signInLimiter is the token bucket of failed sign-ins: perMinute a minute,
// a burst of a second's worth (at least one).
func signInLimiter(perMinute int) *rate.Limiter {
	if perMinute <= 0 {
		perMinute = DefaultSignInLimit
	}
	return rate.NewLimiter(rate.Limit(float64(perMinute)/60), max(1, (perMinute+59)/60))
}

// credential is what a request presented, resolved once by authenticate.
type credential struct {
	bearer bool  // an Authorization header (the cookie is then ignored)
	cookie bool  // a session cookie and no Authorization header
	scope  scope // what it grants; scopeNone: no valid key or session
}

type credKey struct{}

func credOf(r *http.Request) credential {
	c, ok := httpapi.Local(r.Context(), httpapi.SlotCredential).(credential)
	if !ok {
		c, _ = r.Context().Value(credKey{}).(credential)
	}
	return c
}

// Config is what authorization takes from the server's configuration and
// wiring.
type Config struct {
	APIKey        string // --api-key: "" leaves the API open
	ManagementKey string // --management-key
	Management    bool   // --ui-management: management is refused (403) without it
	SignInLimit   int    // failed sign-ins a minute; 0: DefaultSignInLimit
	// WriteError writes the guards' refusals (the server's one error
	// writer).
	WriteError func(http.ResponseWriter, *http.Request, error)
	// Log receives APIKeyOnlyWarning; nil: slog.Default().
	Log *slog.Logger
	// Now is the clock of sessions and the sign-in limiter; nil: time.Now
	// (tests pin it).
	Now func() time.Time
}

// Auth holds the keys, the session table and the sign-in limiter.
type Auth struct {
	apiKey, mgmtKey string
	management      bool // --ui-management
	sessions        *sessionTable
	failures        *rate.Limiter
	now             func() time.Time
	writeError      func(http.ResponseWriter, *http.Request, error)
}

// New builds the authorization of one server; it logs APIKeyOnlyWarning
// when an API key comes without a management key.
func New(cfg Config) *Auth {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.APIKey != "" && cfg.ManagementKey == "" {
		log.Warn(APIKeyOnlyWarning)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Auth{apiKey: cfg.APIKey, mgmtKey: cfg.ManagementKey, management: cfg.Management,
		sessions: newSessionTable(sessionTTL, maxSessions, now),
		failures: signInLimiter(cfg.SignInLimit), now: now, writeError: cfg.WriteError}
}

func sameKey(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// scopeOfKey is what key grants; both keys are always compared, so the
// time taken does not say which one matched.
func (a *Auth) scopeOfKey(key string) scope {
	api, mgmt := sameKey(key, a.apiKey), sameKey(key, a.mgmtKey)
	switch {
	case mgmt:
		return scopeManage
	case api:
		return scopeAPI
	}
	return scopeNone
}

// parseBearer returns the token of the one Authorization header, which
// must be exactly "Bearer TOKEN" (the scheme in any case, one space, a
// token of visible ASCII); ok is false when there is none.
func parseBearer(r *http.Request) (token string, ok bool, err error) {
	vals := r.Header["Authorization"] // Values("Authorization"): the key is canonical
	switch len(vals) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", false, httpapi.InvalidParam("Authorization", "repeated Authorization header: send exactly one")
	}
	h := vals[0]
	if len(h) < 8 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false, httpapi.InvalidParam("Authorization", "Authorization must be exactly one Bearer token")
	}
	token = h[7:]
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return "", false, httpapi.InvalidParam("Authorization", "Authorization must be exactly one Bearer token")
		}
	}
	return token, true, nil
}

// SubprotocolKeyPrefix prefixes the API key offered as a WebSocket
// subprotocol (live.subprotocol).
const SubprotocolKeyPrefix = "openai-insecure-api-key."

// subprotocolKey returns the key a WebSocket handshake (a GET with
// "Upgrade: websocket") offers as the subprotocol
// SubprotocolKeyPrefix+KEY; ok is false when it offers none. Two such
// offers, or an empty key, are a 400 naming Sec-WebSocket-Protocol. No
// other request is read.
func subprotocolKey(r *http.Request) (key string, ok bool, err error) {
	if r.Method != http.MethodGet || !strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket") {
		return "", false, nil
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			k, found := strings.CutPrefix(strings.TrimSpace(p), SubprotocolKeyPrefix)
			if !found {
				continue
			}
			if ok {
				return "", false, httpapi.InvalidParam("Sec-WebSocket-Protocol", "more than one %s subprotocol: offer the key once", SubprotocolKeyPrefix+"KEY")
			}
			if k == "" {
				return "", false, httpapi.InvalidParam("Sec-WebSocket-Protocol", "the %s subprotocol carries no key", SubprotocolKeyPrefix+"KEY")
			}
			key, ok = k, true
		}
	}
	return key, ok, nil
}

// Authenticate resolves the request's credential for the route guards
// below; a malformed or repeated Authorization header is 400 on every route
// (CONTRACT.md ui.auth-header).
//
// Kept out of line, as edge.LimitBody is, so that its closure is compiled
// with the calls in it inlined.
//
//go:noinline
func (a *Auth) Authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok, err := parseBearer(r)
		if err == nil && !ok {
			token, ok, err = subprotocolKey(r)
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		var c credential
		switch {
		case ok:
			c = credential{bearer: true, scope: a.scopeOfKey(token)}
		default:
			if ck, err := r.Cookie(sessionCookie); err == nil {
				c = credential{cookie: true, scope: a.sessions.lookup(ck.Value)}
			}
		}
		if !httpapi.SetLocal(r.Context(), httpapi.SlotCredential, c) { // the request's state, else a value of its own
			r = r.WithContext(context.WithValue(r.Context(), credKey{}, c))
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether r carries the dashboard's same-origin proof:
// no foreign Origin, and either the X-Sluice-UI header or an Origin equal
// to the request's own scheme and host (CONTRACT.md ui.same-origin).
func sameOrigin(r *http.Request) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	origin := r.Header.Get("Origin")
	if origin != "" && origin != scheme+r.Host {
		return false
	}
	return origin != "" || r.Header.Get(uiHeader) == "1"
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

var errNoProof = forbidden("a dashboard session needs the %s: 1 header or a same-origin Origin for this request", uiHeader)

// readOK is the API-key check of a route: open without --api-key; else a
// valid Bearer key, or a session where sessions are accepted.
func (a *Auth) readOK(c credential, sessionsOK bool) *Error {
	if a.apiKey == "" {
		return nil
	}
	switch {
	case c.scope != scopeNone && c.bearer:
		return nil
	case c.scope != scopeNone && c.cookie && sessionsOK:
		return nil
	case c.scope != scopeNone && c.cookie:
		return unauthorized("a dashboard session is accepted only on the dashboard's routes: send the API key as a Bearer token")
	}
	return unauthorized("missing or wrong API key")
}

// manageOK is the management check of a route (CONTRACT.md err.permission,
// err.auth, ui.api-key-only, ui.session-scope).
func (a *Auth) manageOK(c credential, sessionsOK bool) *Error {
	if err := a.readOK(c, sessionsOK); err != nil {
		return err
	}
	switch {
	case !a.management:
		return forbidden("management is disabled: start the server with --ui-management")
	case a.apiKey != "" && a.mgmtKey == "":
		return forbidden("management needs --management-key when --api-key is set")
	case a.mgmtKey == "":
		return nil
	case c.scope == scopeManage && (c.bearer || c.cookie && sessionsOK):
		return nil
	}
	return unauthorized("missing or wrong management key")
}

// guard wraps a route group with check; a session's state-changing request
// also needs the same-origin proof.
//
// Kept out of line, as edge.LimitBody is, so that its closure is compiled
// with the calls in it inlined.
//
//go:noinline
func (a *Auth) guard(check func(credential, bool) *Error, sessionsOK bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := credOf(r)
			if err := check(c, sessionsOK); err != nil {
				a.writeError(w, r, err)
				return
			}
			if c.cookie && c.scope != scopeNone && sessionsOK && !safeMethod(r.Method) && !sameOrigin(r) {
				a.writeError(w, r, errNoProof)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// DashboardRead guards the dashboard's reads: the API key (when set) as a
// Bearer token or any dashboard session.
func (a *Auth) DashboardRead() func(http.Handler) http.Handler { return a.guard(a.readOK, true) }

// APIRead guards the rest of the API: the API key (when set) as a Bearer
// token only.
func (a *Auth) APIRead() func(http.Handler) http.Handler { return a.guard(a.readOK, false) }

// DashboardManage guards the management routes the dashboard's buttons
// use: --ui-management, and the management key as a Bearer token or a
// session made with it.
func (a *Auth) DashboardManage() func(http.Handler) http.Handler { return a.guard(a.manageOK, true) }

// APIManage guards the other management routes: --ui-management and the
// management key as a Bearer token only.
func (a *Auth) APIManage() func(http.Handler) http.Handler { return a.guard(a.manageOK, false) }

// SessionScope is the scope of r's dashboard session, "api" or
// "management", or "" when r came with none (a Bearer key, or no key).
func SessionScope(r *http.Request) string {
	if c := credOf(r); c.cookie {
		return c.scope.String()
	}
	return ""
}

// CanManage says whether r's credential would pass the management check on
// the dashboard's management routes, and if not, why (for /v1/ui/config).
func (a *Auth) CanManage(r *http.Request) (bool, string) {
	if err := a.manageOK(credOf(r), true); err != nil {
		if err.Status == http.StatusUnauthorized {
			return false, "management needs the management key: sign in with it"
		}
		return false, err.Message
	}
	return true, ""
}

// SessionAnswer is the answer of POST and DELETE /v1/ui/session.
type SessionAnswer struct {
	Object    string     `json:"object"` // "session"
	SignedIn  bool       `json:"signed_in"`
	Scope     string     `json:"scope,omitempty"` // "api" or "management"
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// HandleSignIn answers POST /v1/ui/session {"key": KEY}: a session cookie
// for a valid key, 401 for any other, without saying which keys exist; 429
// once failures pass the limit (CONTRACT.md ui.sign-in, ui.sign-in-rate).
func (a *Auth) HandleSignIn(w http.ResponseWriter, r *http.Request) error {
	if !sameOrigin(r) {
		return errNoProof
	}
	// Every attempt takes a token at once, so concurrent failures cannot
	// pass the limit together; an attempt that does not fail gives it back.
	now := a.now()
	res := a.failures.ReserveN(now, 1)
	if wait := res.DelayFrom(now); !res.OK() || wait > 0 {
		res.CancelAt(now)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		return &Error{Status: http.StatusTooManyRequests, Type: "permission_error", Code: "rate_limited",
			Message: "too many failed sign-ins: try again later"}
	}
	failed := true
	defer func() {
		if !failed {
			res.CancelAt(now)
		}
	}()
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	var body struct {
		Key string `json:"key"`
	}
	if err := edge.Decode(r, &body); err != nil {
		return err
	}
	if body.Key == "" || len(body.Key) > maxKeyLen {
		return httpapi.InvalidParam("key", "key must be 1 to %d bytes", maxKeyLen)
	}
	sc := a.scopeOfKey(body.Key)
	if sc == scopeNone {
		return unauthorized("wrong key")
	}
	failed = false
	token, exp, err := a.sessions.create(sc)
	if err != nil {
		return err
	}
	http.SetCookie(w, sessionCookieFor(r, token, exp, sessionTTL))
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, SessionAnswer{Object: "session", SignedIn: true, Scope: sc.String(), ExpiresAt: &exp})
}

// HandleSignOut answers DELETE /v1/ui/session: the cookie's session is
// deleted and the cookie cleared (CONTRACT.md ui.sign-out).
func (a *Auth) HandleSignOut(w http.ResponseWriter, r *http.Request) error {
	if !sameOrigin(r) {
		return errNoProof
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		a.sessions.remove(ck.Value)
	}
	http.SetCookie(w, clearedCookie(r))
	return writeJSON(w, SessionAnswer{Object: "session"})
}

// writeJSON writes v with status 200.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return fmt.Errorf("auth: encode response: %w", err)
	}
	return nil
}
