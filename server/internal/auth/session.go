package auth

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Dashboard sessions (CONTRACT.md ui.sign-in, ui.session-scope,
// ui.sign-out, ui.session-lifetime): a browser exchanges a key for a random
// token in an HttpOnly, SameSite=Strict cookie. The table keeps a hash of
// each token, never the token, with its scope and expiry; it is bounded
// per scope, and the oldest session of a scope makes room for a new one of
// the same scope, so sign-ins with the API key never evict a management
// session.

const (
	sessionCookie = "sluice_session"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 1000
	tokenBytes    = 32 // 256 bits from crypto/rand
)

// tokenLen is the length of an encoded token; a cookie of any other length
// is refused before it is hashed.
var tokenLen = base64.RawURLEncoding.EncodedLen(tokenBytes)

// scope is what a credential grants.
type scope uint8

const (
	scopeNone   scope = iota
	scopeAPI          // the API key: the dashboard's reads (and, as a Bearer token, the whole API but management)
	scopeManage       // the management key: the API key's rights and management
)

func (sc scope) String() string {
	switch sc {
	case scopeAPI:
		return "api"
	case scopeManage:
		return "management"
	}
	return ""
}

type session struct {
	hash    [sha256.Size]byte
	scope   scope
	expires time.Time
}

// sessionTable is the server-side table of dashboard sessions. Every
// session lives for the same ttl from its creation, so creation order is
// expiry order: the front of a scope's order is both its oldest and the
// first to expire.
type sessionTable struct {
	mu     sync.Mutex
	byHash map[[sha256.Size]byte]*list.Element // of *session
	order  [scopeManage + 1]*list.List         // per scope, oldest first
	ttl    time.Duration
	max    int // per scope
	now    func() time.Time
}

func newSessionTable(ttl time.Duration, max int, now func() time.Time) *sessionTable {
	if now == nil {
		now = time.Now
	}
	t := &sessionTable{byHash: map[[sha256.Size]byte]*list.Element{}, ttl: ttl, max: max, now: now}
	for i := range t.order {
		t.order[i] = list.New()
	}
	return t
}

// create makes a session of scope sc and returns its token and expiry,
// evicting expired sessions and, when sc's pool is full, its oldest one.
func (t *sessionTable) create(sc scope) (string, time.Time, error) {
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("session token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expireLocked(now)
	for t.order[sc].Len() >= t.max {
		t.removeLocked(t.order[sc].Front())
	}
	s := &session{hash: sha256.Sum256([]byte(token)), scope: sc, expires: now.Add(t.ttl)}
	t.byHash[s.hash] = t.order[sc].PushBack(s)
	return token, s.expires, nil
}

// lookup returns the scope of a live session's token (scopeNone for an
// unknown, malformed or expired one).
func (t *sessionTable) lookup(token string) scope {
	if len(token) != tokenLen {
		return scopeNone
	}
	h := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byHash[h]
	if !ok {
		return scopeNone
	}
	s := e.Value.(*session)
	if !t.now().Before(s.expires) {
		t.removeLocked(e)
		return scopeNone
	}
	return s.scope
}

// remove deletes the session of token, if any.
func (t *sessionTable) remove(token string) {
	if len(token) != tokenLen {
		return
	}
	h := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byHash[h]; ok {
		t.removeLocked(e)
	}
}

// size is the number of sessions held, expired ones included until the
// next create or lookup finds them.
func (t *sessionTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byHash)
}

func (t *sessionTable) expireLocked(now time.Time) {
	for _, o := range t.order {
		for e := o.Front(); e != nil && !now.Before(e.Value.(*session).expires); e = o.Front() {
			t.removeLocked(e)
		}
	}
}

func (t *sessionTable) removeLocked(e *list.Element) {
	s := e.Value.(*session)
	delete(t.byHash, s.hash)
	t.order[s.scope].Remove(e)
}

// sessionCookieFor is the cookie that carries token until expires: HttpOnly,
// SameSite=Strict, Path=/, Secure when the request came over TLS.
func sessionCookieFor(r *http.Request, token string, expires time.Time, ttl time.Duration) *http.Cookie {
	return &http.Cookie{Name: sessionCookie, Value: token, Path: "/", Expires: expires, MaxAge: int(ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// clearedCookie tells the browser to drop its session cookie.
func clearedCookie(r *http.Request) *http.Cookie {
	return &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}
