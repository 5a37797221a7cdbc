package edge

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestV2ProbesAreProbes: the protocol's two probes pass the same checks as
// /healthz and /readyz, the Host exemption and the connection limit's
// probe reserve (CONTRACT.md oip.live, oip.ready; TestConnLimitProbeReserve
// shows the reserve for /healthz), and nothing else under /v2 does.
func TestV2ProbesAreProbes(t *testing.T) {
	for path, want := range map[string]bool{"/v2/health/live": true, "/v2/health/ready": true, "/healthz": true,
		"/v2": false, "/v2/models/m/ready": false, "/v2/health/live/x": false, "/v2/health": false} {
		r := httptest.NewRequest("GET", path, nil)
		if got := isProbe(r) && probePath(path); got != want {
			t.Errorf("%s: probe %v, want %v", path, got, want)
		}
	}
	if isProbe(httptest.NewRequest("POST", "/v2/health/ready", nil)) {
		t.Error("a POST is not a probe")
	}
	if !isProbe(httptest.NewRequest("HEAD", "/v2/health/ready", nil)) {
		t.Error("a HEAD probe is a probe")
	}
}

// The Host allow-list (CONTRACT.md err.host): the loopback names and the
// listen address's host on any port, --allowed-hosts names on any port and
// name:port entries on that port only, case and a trailing dot ignored; an
// unspecified listen address adds nothing, "*" allows every Host, and an
// entry that is not a host name is refused at start (edgemutants
// host-portless-any).
func TestHostAllowList(t *testing.T) {
	h, err := newHostAllowList("10.0.0.5:8080", []string{"Sluice.Example", "api.example:9000", " "})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"localhost:1": true, "127.0.0.1": true, "[::1]:8080": true, "10.0.0.5:9": true, "": true,
		"sluice.example.:443": true, "SLUICE.EXAMPLE": true,
		"api.example:9000": true, "api.example:9001": false, "api.example": false,
		"evil.example": false, "evil.example:8080": false, "0.0.0.0:8080": false,
	} {
		// Twice, after another allowed Host: the last allowed value is
		// remembered, and only that value is allowed by it.
		h.allowed("api.example:9000")
		for range 2 {
			if got := h.allowed(host); got != want {
				t.Errorf("Host %q: allowed %v, want %v", host, got, want)
			}
		}
	}
	unspec, err := newHostAllowList("0.0.0.0:8080", nil)
	if err != nil || unspec.allowed("0.0.0.0:8080") || unspec.allowed("192.168.1.2:8080") {
		t.Errorf("an unspecified listen address added hosts: %v", err)
	}
	star, _ := newHostAllowList("127.0.0.1:8080", []string{"*"})
	if !star.allowed("whatever.example") {
		t.Error("--allowed-hosts '*' refused a Host")
	}
	for _, bad := range []string{"http://x.example", "x.example/", "a@b", "x y"} {
		if _, err := newHostAllowList("", []string{bad}); err == nil {
			t.Errorf("--allowed-hosts %q accepted", bad)
		}
	}
}

// CheckHost refuses a Host not allowed with 403 host_not_allowed, except
// on the four probe paths (err.host); CheckOrigin refuses every
// state-changing method sent cross-site unless its Origin is trusted, and
// lets safe methods and requests without browser headers pass (err.origin;
// edgemutants origin-delete-unchecked, origin-put-unchecked,
// host-probe-prefix).
func TestCheckHostAndOrigin(t *testing.T) {
	e := testEdge(t, Config{Listen: "127.0.0.1:8080", AllowedOrigins: []string{"https://dash.example"}})
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := e.CheckHost(e.CheckOrigin(ok))
	do := func(method, host, path string, hdr ...string) (int, string) {
		r := httptest.NewRequest(method, path, nil)
		r.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code, rec.Body.String()
	}
	for _, p := range []string{"/healthz", "/readyz", "/v2/health/live", "/v2/health/ready"} {
		if code, _ := do("GET", "10.1.2.3:8080", p); code != 200 {
			t.Errorf("probe %s by IP: %d", p, code)
		}
	}
	for _, p := range []string{"/v1/models", "/v2", "/v2/models/m"} {
		if code, body := do("GET", "evil.example", p); code != 403 || body != "host_not_allowed" {
			t.Errorf("%s from a foreign Host: %d %s", p, code, body)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		if code, body := do(m, "127.0.0.1:8080", "/v1/models/m", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); code != 403 ||
			body != "origin_not_allowed" {
			t.Errorf("cross-site %s: %d %s", m, code, body)
		}
		if code, _ := do(m, "127.0.0.1:8080", "/v1/models/m", "Sec-Fetch-Site", "cross-site", "Origin", "https://dash.example"); code != 200 {
			t.Errorf("%s from the trusted origin: %d", m, code)
		}
		if code, _ := do(m, "127.0.0.1:8080", "/v1/models/m"); code != 200 {
			t.Errorf("%s without browser headers: %d", m, code)
		}
	}
	if code, _ := do("GET", "127.0.0.1:8080", "/v1/models", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); code != 200 {
		t.Errorf("a cross-site GET: %d", code)
	}
	if _, err := New(Config{AllowedOrigins: []string{"not an origin"}, Log: slog.New(slog.DiscardHandler)}); err == nil {
		t.Error("--allowed-origins 'not an origin' accepted")
	}
}
