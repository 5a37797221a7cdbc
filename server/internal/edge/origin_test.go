package edge

import (
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
}
