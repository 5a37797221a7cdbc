package server

import (
	"net/http"
	"testing"
)

// Every state-changing method is checked for a cross-site Origin, not only
// POST: PUT, DELETE and PATCH too, on a routed path and on one that no
// route serves (the check runs before routing). Reads pass (CONTRACT.md
// err.origin; edgemutants origin-delete-unchecked, origin-put-unchecked).
func TestOriginEveryStateChangingMethod(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/models/a/unload"},
		{"PUT", "/v1/models/a"},
		{"DELETE", "/v1/ui/session"},
		{"DELETE", "/v1/models/a"},
		{"PATCH", "/v1/models/a"},
	} {
		for _, hdr := range [][]string{
			{"Origin", "http://evil.example", "Content-Type", "application/json"},
			{"Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"},
		} {
			if st, code := hreq(t, ts, c.method, "127.0.0.1:8080", c.path, `{"engine":"fixture"}`, hdr...); st != http.StatusForbidden || code != "origin_not_allowed" {
				t.Errorf("%s %s %v: %d %q, want 403 origin_not_allowed", c.method, c.path, hdr, st, code)
			}
		}
	}
	if m := ts.model("a"); !m.Loaded {
		t.Fatalf("a refused request changed the model: %+v", m)
	}
}

// The WebSocket handshake of /v1/realtime trusts the origins of
// --allowed-origins, as the state-changing routes do, and refuses others
// (CONTRACT.md err.origin; edgemutants ws-trusted-origins-ignored,
// ws-any-origin).
func TestRealtimeHandshakeOrigins(t *testing.T) {
	ts := startRealtime(t, 2, func(c *Config) { c.AllowedOrigins = []string{"https://dash.example", "https://[::1]:8443"} })
	// Unloaded first: a refused handshake must not make the server load it
	// (before the check moved ahead of the lease, a foreign page's attempt
	// took a lease, and with it a cold load, before coder/websocket refused).
	ts.must(http.StatusOK, "POST", "/v1/models/asr/unload", "")
	for _, c := range []struct {
		origin string
		ok     bool
	}{
		{"http://dash.example", false}, // same host, another scheme
		{"https://evil.example", false},
		{"https://[::2]:8443", false},
		{"https://dash.example", true},
		// An allowed IPv6 origin: coder/websocket read its host as a glob
		// pattern ("[::1]" a character class) and refused it after the
		// lease, in plain text.
		{"https://[::1]:8443", true},
	} {
		conn, res, err := ts.tryDialRT("asr", "Origin", c.origin)
		if c.ok {
			if err != nil {
				t.Fatalf("origin %s: %v (%v)", c.origin, err, res)
			}
			_ = conn.CloseNow()
			ts.awaitActive("asr", 0) // the next session needs the slot back
			continue
		}
		if err == nil {
			_ = conn.CloseNow()
			t.Fatalf("origin %s: the handshake was accepted", c.origin)
		}
		if res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("origin %s: %v (%v), want 403", c.origin, err, res)
		}
		if st, err := ts.s.Runtime().StatusOf("asr"); err != nil || st.Loaded {
			t.Fatalf("origin %s: a refused handshake loaded the model: %+v %v", c.origin, st, err)
		}
	}
}
