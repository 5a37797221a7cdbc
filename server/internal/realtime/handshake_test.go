package realtime

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCheckHandshake: what the WebSocket library would refuse in plain
// text is refused by checkHandshake in the API's shape, naming the header
// (CONTRACT.md live.handshake, err.shape); an upgrade it accepts passes.
func TestCheckHandshake(t *testing.T) {
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	upgrade := func(mod func(r *http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/v1/realtime", nil)
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", key)
		if mod != nil {
			mod(r)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		mod   func(r *http.Request)
		code  string
		param string
	}{
		{"valid", nil, "", ""},
		{"upgrade token on a second Connection line", func(r *http.Request) {
			r.Header["Connection"] = []string{"keep-alive", "Upgrade"}
		}, "", ""},
		{"plain GET", func(r *http.Request) { r.Header.Del("Upgrade") }, "websocket_required", ""},
		{"POST", func(r *http.Request) { r.Method = http.MethodPost }, "websocket_required", ""},
		{"HTTP/1.0", func(r *http.Request) { r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.0", 1, 0 }, "websocket_required", ""},
		{"version 8", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "8") }, "websocket_required", ""},
		{"no key", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Key") }, "websocket_required", ""},
		{"two keys", func(r *http.Request) { r.Header.Add("Sec-WebSocket-Key", key) }, "invalid_value", "Sec-WebSocket-Key"},
		{"short key", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "c2hvcnQ=") }, "invalid_value", "Sec-WebSocket-Key"},
		{"not base64", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "not base64 at all!!") }, "invalid_value", "Sec-WebSocket-Key"},
	} {
		err := checkHandshake(upgrade(tc.mod))
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.code != "" && err == nil:
			t.Errorf("%s: accepted", tc.name)
		case err != nil && (err.Status != http.StatusBadRequest || err.Code != tc.code || err.Param != tc.param):
			t.Errorf("%s: %d %s param %q, want 400 %s param %q", tc.name, err.Status, err.Code, err.Param, tc.code, tc.param)
		}
	}
}
