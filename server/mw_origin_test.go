package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// hreq sends one request to ts's handler with the given Host and headers
// (name, value pairs) and returns status and error code.
func hreq(t *testing.T, ts *tserver, method, host, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	ts.s.Handler().ServeHTTP(rec, req)
	var e errorBody
	if rec.Code != 200 {
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s %s: %d, not an error body: %s", method, path, rec.Code, rec.Body)
		}
	}
	return rec.Code, e.Error.Code
}

// The curl: a page on another site unloads a model of the default
// setup (management on, no key) with a text/plain "simple" request that
// needs no preflight (CONTRACT.md err.origin, err.content-type).
func TestCrossSiteRequestRefused(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	body := `{"models":["a"]}`
	for _, c := range []struct {
		name string
		hdr  []string
		want int
		code string
	}{
		{"evil origin, text/plain", []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}, 403, "origin_not_allowed"},
		{"evil origin, json", []string{"Origin", "http://evil.example", "Content-Type", "application/json"}, 403, "origin_not_allowed"},
		{"sec-fetch-site cross-site", []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, 403, "origin_not_allowed"},
		{"sec-fetch-site same-site", []string{"Sec-Fetch-Site", "same-site", "Content-Type", "application/json"}, 403, "origin_not_allowed"},
		{"no origin, text/plain", []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"no origin, form", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"no origin, no content type", nil, 415, "unsupported_media_type"},
	} {
		if st, code := hreq(t, ts, "POST", "127.0.0.1:8080", "/v1/models/unload", body, c.hdr...); st != c.want || code != c.code {
			t.Errorf("%s: %d %q, want %d %q", c.name, st, code, c.want, c.code)
		}
	}
	if m := ts.model("a"); !m.Loaded {
		t.Fatalf("a refused request unloaded the model: %+v", m)
	}
	// A body-less state-changing route needs no Content-Type, but a foreign
	// origin is refused there too.
	if st, code := hreq(t, ts, "POST", "127.0.0.1:8080", "/v1/models/a/unload", "", "Origin", "http://evil.example"); st != 403 || code != "origin_not_allowed" {
		t.Fatalf("body-less unload from a foreign origin: %d %q", st, code)
	}
	if m := ts.model("a"); !m.Loaded {
		t.Fatalf("a refused unload unloaded the model: %+v", m)
	}
	// The dashboard's own origin, a same-origin fetch and a non-browser client pass.
	for _, hdr := range [][]string{
		{"Origin", "http://127.0.0.1:8080", "Content-Type", "application/json; charset=utf-8"},
		{"Sec-Fetch-Site", "same-origin", "Origin", "http://127.0.0.1:8080", "Content-Type", "application/json"},
		{"Content-Type", "application/json"},
	} {
		ts.put("a", `{"engine":"fixture"}`)
		if st, code := hreq(t, ts, "POST", "127.0.0.1:8080", "/v1/models/unload", body, hdr...); st != 200 {
			t.Fatalf("%v: %d %q", hdr, st, code)
		}
	}
	if st, _ := hreq(t, ts, "POST", "127.0.0.1:8080", "/v1/models/a/load", ""); st != 200 {
		t.Fatalf("body-less load without Content-Type: %d", st)
	}
	// Reads are never refused for their origin.
	if st, _ := hreq(t, ts, "GET", "127.0.0.1:8080", "/v1/models", "", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"); st != 200 {
		t.Fatalf("GET from a foreign origin: %d", st)
	}
}

func TestAllowedOrigins(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.AllowedOrigins = []string{"https://dash.example"} })
	ts.put("a", `{"engine":"fixture"}`)
	if st, code := hreq(t, ts, "POST", "127.0.0.1", "/v1/models/a/unload", "", "Origin", "https://dash.example", "Sec-Fetch-Site", "cross-site"); st != 200 {
		t.Fatalf("trusted origin: %d %q", st, code)
	}
	if st, code := hreq(t, ts, "POST", "127.0.0.1", "/v1/models/a/unload", "", "Origin", "http://dash.example"); st != 403 || code != "origin_not_allowed" {
		t.Fatalf("same host, other scheme: %d %q", st, code)
	}
	if _, err := New(Config{Listen: "127.0.0.1:0", MaxBody: 1, AllowedOrigins: []string{"dash.example"}}, Options{}); err == nil {
		t.Fatal("an origin without a scheme was accepted")
	}
}

// DNS rebinding: a page on evil.example rebinds its name to 127.0.0.1 and
// reaches the server with Host: evil.example (CONTRACT.md err.host).
func TestHostAllowList(t *testing.T) {
	ts := newServer(t, func(c *Config) {
		c.Listen = "10.1.2.3:8080"
		c.AllowedHosts = []string{"sluice.internal", "gw.example:9000"}
	})
	for _, c := range []struct {
		host, path string
		want       int
	}{
		{"evil.example", "/v1/models", 403},
		{"evil.example:8080", "/v1/models", 403},
		{"127.0.0.1.evil.example:8080", "/v1/models", 403},
		{"gw.example:9001", "/v1/models", 403},
		{"gw.example", "/v1/models", 403},
		{"10.9.9.9:8080", "/v1/models", 403},
		{"evil.example", "/", 403},
		{"localhost:8080", "/v1/models", 200},
		{"LOCALHOST", "/v1/models", 200},
		{"127.0.0.1", "/v1/models", 200},
		{"[::1]:8080", "/v1/models", 200},
		{"10.1.2.3:8080", "/v1/models", 200},
		{"sluice.internal:443", "/v1/models", 200},
		{"gw.example:9000", "/v1/models", 200},
		// Probes address the pod by IP: exempt, read-only.
		{"10.9.9.9:8080", "/healthz", 200},
		{"10.9.9.9:8080", "/readyz", 200},
	} {
		st, code := hreq(t, ts, "GET", c.host, c.path, "")
		if st != c.want || (c.want == 403 && code != "host_not_allowed") {
			t.Errorf("Host %q %s: %d %q, want %d", c.host, c.path, st, code, c.want)
		}
	}
	// A rebinding page cannot change anything either.
	ts.put("a", `{"engine":"fixture"}`)
	if st, _ := hreq(t, ts, "POST", "evil.example:8080", "/v1/models/unload", `{"models":["a"]}`, "Content-Type", "application/json"); st != 403 {
		t.Fatalf("rebinding unload: %d", st)
	}
	if m := ts.model("a"); !m.Loaded {
		t.Fatalf("%+v", m)
	}

	star := newServer(t, func(c *Config) { c.AllowedHosts = []string{"*"} })
	if st, _ := hreq(t, star, "GET", "anything.example", "/v1/models", ""); st != 200 {
		t.Fatalf("--allowed-hosts '*': %d", st)
	}
	// Listening on every interface adds no name by itself.
	all := newServer(t, func(c *Config) { c.Listen = "0.0.0.0:8080" })
	if st, _ := hreq(t, all, "GET", "0.0.0.0:8080", "/v1/models", ""); st != 403 {
		t.Fatalf("0.0.0.0 host: %d", st)
	}
}
