package server

import (
	"net/http"
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

// A handshake that passes Sluice's checks but that the WebSocket library
// refuses (two Sec-WebSocket-Key headers) gives its lease back: the
// model's only slot serves a session afterwards (CONTRACT.md
// live.handshake; edgemutants ws-failed-upgrade-leaks-lease).
func TestRefusedUpgradeReleasesItsLease(t *testing.T) {
	ts := startRealtime(t, 1, nil)
	for range 3 {
		req, err := http.NewRequest("GET", ts.url+"/v1/realtime?intent=transcription&model=asr", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"} {
			req.Header.Set(k, v)
		}
		req.Header.Add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Add("Sec-WebSocket-Key", "c2Vjb25kIGtleSBoZXJlIQ==")
		res, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode == http.StatusSwitchingProtocols {
			t.Fatal("a handshake with two keys was upgraded")
		}
	}
	if m := ts.model("asr"); m.ActiveSlots != 0 {
		t.Fatalf("refused upgrades hold slots: %+v", m)
	}
	rc := ts.dialRT("asr")
	_ = rc.c.CloseNow()
}
