package server

import (
	"net/http"
	"testing"

	"github.com/coder/websocket"
)

// A browser cannot set Authorization on a WebSocket: OpenAI's browser
// clients offer the key as the subprotocol openai-insecure-api-key.KEY
// beside "realtime". The server's authentication takes that key as the
// Bearer token, and the handshake selects "realtime" (CONTRACT.md
// live.subprotocol); a wrong key is 401 before the upgrade and no slot
// is held.
func TestRealtimeSubprotocolKey(t *testing.T) {
	ts := startRealtime(t, 1, func(c *Config) { c.APIKey = "rt-key" })
	dial := func(protocols ...string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(ctxLimit(t), "ws://"+ts.addr+"/v1/realtime?model=asr",
			&websocket.DialOptions{HTTPClient: &http.Client{}, Subprotocols: protocols})
	}
	for _, c := range []struct {
		name      string
		protocols []string
		status    int
	}{
		{"no key", []string{"realtime"}, http.StatusUnauthorized},
		{"wrong key", []string{"realtime", "openai-insecure-api-key.nope"}, http.StatusUnauthorized},
		{"two keys", []string{"realtime", "openai-insecure-api-key.rt-key", "openai-insecure-api-key.rt-key"}, http.StatusBadRequest},
	} {
		conn, res, err := dial(c.protocols...)
		if err == nil {
			_ = conn.CloseNow()
			t.Fatalf("%s: the session opened", c.name)
		}
		if res == nil || res.StatusCode != c.status {
			t.Errorf("%s: %v (%v), want %d", c.name, res, err, c.status)
		}
	}
	conn, _, err := dial("realtime", "openai-insecure-api-key.rt-key")
	if err != nil {
		t.Fatalf("the key as a subprotocol: %v", err)
	}
	defer conn.CloseNow()
	if p := conn.Subprotocol(); p != "realtime" {
		t.Errorf("selected subprotocol %q, want realtime", p)
	}
	rc := &rtClient{t: t, c: conn}
	if ev := rc.next(); ev["type"] != "session.created" {
		t.Fatalf("first event %v", ev)
	}
	if st, _ := ts.s.Runtime().StatusOf("asr"); st.ActiveSlots != 1 {
		t.Errorf("the session holds %d slots, want 1", st.ActiveSlots)
	}
	if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
}
