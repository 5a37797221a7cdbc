package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A stream whose engine fails after its first bytes ends with an error
// event and gives its slot back: the next request on the model's only slot
// is served (CONTRACT.md fail.execution; edgemutants
// stream-error-leaks-lease).
func TestFailedStreamReleasesItsSlot(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	for range 3 {
		r := ts.do("POST", "/v1/models/a/infer", `{"input":{"chunks":5,"fail_chunk":2},"stream":true}`)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "event: error") {
			t.Fatalf("failing stream: %d %s", r.status, r.body)
		}
		ts.must(http.StatusOK, "POST", "/v1/models/a/infer", `{"input":{},"admission_timeout_ms":2000}`)
	}
	if m := ts.model("a"); m.ActiveSlots != 0 {
		t.Fatalf("slots still held after the requests: %+v", m)
	}
}

// A handshake that passes Sluice's checks but whose upgrade the WebSocket
// library then refuses gives its lease back: the model's only slot serves
// a session afterwards (CONTRACT.md live.handshake; edgemutants
// ws-failed-upgrade-leaks-lease). What the library refuses in the request
// itself (two Sec-WebSocket-Key headers) is refused before the lease now
// (realtime TestCheckHandshake); what is left is a connection that cannot
// be taken over, here a response writer without Hijack (as an HTTP/2
// stream is).
func TestRefusedUpgradeReleasesItsLease(t *testing.T) {
	ts := startRealtime(t, 1, nil)
	for range 3 {
		req := httptest.NewRequest("GET", "http://127.0.0.1/v1/realtime?intent=transcription&model=asr", nil)
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", AdmissionTimeoutHeader: "2000"} {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		ts.s.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusNotImplemented { // the library's refusal: the handshake reached the upgrade
			t.Fatalf("answer %d %q, want the upgrade's refusal (501)", rec.Code, rec.Body.String())
		}
	}
	if m := ts.model("asr"); m.ActiveSlots != 0 {
		t.Fatalf("refused upgrades hold slots: %+v", m)
	}
	rc := ts.dialRT("asr")
	_ = rc.c.CloseNow()
}
