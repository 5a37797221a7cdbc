package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/server/internal/realtime"
)

// The handshake is checked before any lease: a plain GET, a wrong or empty
// intent, an empty or repeated model, an unknown query parameter, an unknown model and a model that
// takes no live audio are refused with the server's error shape
// (CONTRACT.md live.handshake).
func TestRealtimeHandshakeRefusals(t *testing.T) {
	ts := startRealtime(t, 1, nil)
	ts.put("fx", `{"engine":"fixture","slots":1}`)
	ws := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	for _, c := range []struct {
		query  string
		hdr    []string
		status int
		code   string
	}{
		{"?intent=transcription&model=asr", nil, 400, "websocket_required"},
		{"?model=", ws, 400, ""},
		{"?intent=transcription&model=asr&model=fx", ws, 400, ""},
		{"?intent=conversation&model=asr", ws, 400, ""},
		{"?intent=", ws, 400, ""},
		{"?intent=transcription&model=asr&voice=x", ws, 400, ""},
		{"?intent=transcription&model=nope", ws, 404, ""},
		{"?intent=transcription&model=fx", ws, 400, "live_unsupported"},
	} {
		r := ts.do("GET", "/v1/realtime"+c.query, "", c.hdr...)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.query, r.status, r.body, c.status)
			continue
		}
		r.errType(t)
		if c.code != "" && !strings.Contains(string(r.body), c.code) {
			t.Errorf("%s: %s lacks code %s", c.query, r.body, c.code)
		}
	}
	if st, _ := ts.s.Runtime().StatusOf("asr"); st.ActiveSlots != 0 {
		t.Errorf("a refused handshake holds a slot: %+v", st)
	}
}

// Client events that cannot take effect are error events naming what is
// wrong, and the session goes on (CONTRACT.md live.events).
func TestRealtimeEventErrors(t *testing.T) {
	ts := startRealtime(t, 1, nil)
	rc := ts.dialRT("asr")
	for _, c := range []struct {
		ev   any
		code string
	}{
		{map[string]any{"type": "response.create"}, "unknown_event"},
		{map[string]any{"type": "input_audio_buffer.append", "audio": "AAA", "extra": 1}, "invalid_event"},
		{map[string]any{"type": "input_audio_buffer.append", "audio": "!!!"}, "invalid_audio"},
		{map[string]any{"type": "input_audio_buffer.append", "audio": "AAAA"}, "invalid_audio"}, // 3 bytes
		{map[string]any{"type": "input_audio_buffer.commit"}, "input_audio_buffer_commit_empty"},
		{map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_format": "g711_ulaw"}}, "invalid_value"},
		{map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_transcription": map[string]any{"model": "whisper-1"}}}, "invalid_value"},
		{map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_transcription": map[string]any{"prompt": "hi"}}}, "invalid_value"},
		{map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_noise_reduction": map[string]any{"type": "near_field"}}}, "invalid_value"},
		{map[string]any{"type": "transcription_session.update", "session": map[string]any{"voice": "alloy"}}, "invalid_event"},
	} {
		rc.send(c.ev)
		ev := rc.next()
		e, _ := ev["error"].(map[string]any)
		if ev["type"] != "error" || e["code"] != c.code {
			t.Errorf("%v: answered %v, want error %s", c.ev, ev, c.code)
		}
	}
	if err := rc.c.Write(ctxLimit(t), websocket.MessageBinary, []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if ev := rc.next(); ev["type"] != "error" {
		t.Errorf("binary message answered %v", ev)
	}
	rc.appendAudio(rtAudio(t)[:realtime.Rate/5])
	rc.send(map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_transcription": map[string]any{"language": "fr"}}})
	if ev := rc.next(); ev["type"] != "error" {
		t.Errorf("a language change after audio answered %v", ev)
	}
	rc.send(map[string]string{"type": "input_audio_buffer.clear"})
	if ev := rc.next(); ev["type"] != "input_audio_buffer.cleared" {
		t.Errorf("clear answered %v", ev)
	}
	rc.send(map[string]string{"type": "input_audio_buffer.commit"})
	if ev := rc.next(); ev["type"] != "error" {
		t.Errorf("a commit after a clear answered %v", ev)
	}
}

// The idle limit, the maximum session length and the audio rate check end
// a session with 1008 and their reason (CONTRACT.md live.limits);
// the length limit first transcribes the
// turn in progress.
func TestRealtimeLimits(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		ts := startRealtime(t, 1, func(c *Config) { c.RealtimeIdle = 150 * time.Millisecond })
		ce, _ := ts.dialRT("asr").closed()
		if ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "idle") {
			t.Errorf("close %v", ce)
		}
	})
	// Messages that take no effect (malformed JSON, unknown events, an
	// append of no valid audio) do not reset the idle limit: a client that
	// sends nothing else is closed as idle. On the old code every message
	// reset it, and this loop ran until its bound.
	t.Run("idle-despite-invalid", func(t *testing.T) {
		ts := startRealtime(t, 1, func(c *Config) { c.RealtimeIdle = 300 * time.Millisecond })
		rc := ts.dialRT("asr")
		ctx := ctxLimit(t)
		junk := [][]byte{[]byte("{"), []byte(`{"type":"response.create"}`), []byte(`{"type":"input_audio_buffer.append","audio":"AAAA"}`)} // each answered with an error
		var err error
		for i := 0; err == nil; i++ {
			if err = rc.c.Write(ctx, websocket.MessageText, junk[i%len(junk)]); err != nil {
				_, _, err = rc.c.Read(ctx) // closed meanwhile: the close frame is next
				break
			}
			_, err = rc.read()
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "idle") {
			t.Errorf("after messages that took no effect: %v, want 1008 idle", err)
		}
	})
	t.Run("max-length", func(t *testing.T) {
		ts := startRealtime(t, 1, func(c *Config) { c.RealtimeMaxSession = 5 * time.Second })
		rc := ts.dialRT("asr")
		_ = rc.tryAppend(rtAudio(t)) // the limit may close the session meanwhile
		ce, evs := rc.closed()
		if ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "maximum session length") {
			t.Errorf("close %v", ce)
		}
		if len(evs) == 0 || evs[len(evs)-1]["type"] != "conversation.item.input_audio_transcription.completed" {
			t.Errorf("the turn in progress was not completed: %v", evs)
		}
	})
	t.Run("rate", func(t *testing.T) {
		ts := startRealtime(t, 1, func(c *Config) { c.RealtimeMaxRate, c.RealtimeBuffer = 1, 100*time.Millisecond })
		rc := ts.dialRT("asr")
		_ = rc.tryAppend(rtAudio(t)) // over a second of audio at once; the session closes meanwhile
		ce, evs := rc.closed()
		if ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "rate") {
			t.Errorf("close %v", ce)
		}
		found := false
		for _, ev := range evs {
			if e, ok := ev["error"].(map[string]any); ok && e["code"] == "audio_rate_exceeded" {
				found = true
			}
		}
		if !found {
			t.Errorf("no audio_rate_exceeded error before the close: %v", evs)
		}
		ts.awaitActive("asr", 0)
	})
}
