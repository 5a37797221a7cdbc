package realtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// dialQuery opens a session at /v1/realtime?query with headers h.
func (e *rtEnv) dialQuery(query string, h http.Header) *websocket.Conn {
	e.t.Helper()
	c, res, err := websocket.Dial(e.ctx(), "ws://"+e.addr+"/v1/realtime"+query, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		e.t.Fatalf("dial %s: %v (%v)", query, err, res)
	}
	e.t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// send writes one client event.
func (e *rtEnv) send(c *websocket.Conn, ev any) {
	e.t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := c.Write(e.ctx(), websocket.MessageText, b); err != nil {
		e.t.Fatal(err)
	}
}

// slots returns the slots model holds.
func (e *rtEnv) slots(model string) int {
	e.t.Helper()
	st, err := e.rt.Runtime.StatusOf(model)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.ActiveSlots
}

// wantError reads one event and fails unless it is an error with code and
// param (param "" for none).
func (e *rtEnv) wantError(c *websocket.Conn, code, param string) map[string]any {
	e.t.Helper()
	ev := e.next(c)
	er, _ := ev["error"].(map[string]any)
	p, _ := er["param"].(string)
	if ev["type"] != "error" || er["code"] != code || p != param {
		e.t.Fatalf("got %v; want an error event code %s param %q", ev, code, param)
	}
	return er
}

// tone is 200 ms of pcm16 at 24 kHz, base64.
func tone() string {
	return base64.StdEncoding.EncodeToString(make([]byte, 2*Rate/5))
}

// A GA client (no intent, no OpenAI-Beta header) that names no model in
// the URL gets session.created and holds no slot; audio before admission
// is refused (model_not_set) and dropped; session.update with type
// transcription and session.audio.input.transcription.model admits it (one slot),
// answered with session.updated in the GA shape; its turns are
// transcribed; another model is then refused; its close releases the
// slot (CONTRACT.md live.late-admission, live.ga-session-update).
func TestLateAdmissionGA(t *testing.T) {
	e := newRTEnv(t)
	c := e.dialQuery("", nil)
	if ev := e.next(c); ev["type"] != "session.created" {
		t.Fatalf("first event %v; want session.created", ev)
	}
	if n := e.slots("asr"); n != 0 {
		t.Fatalf("an unadmitted session holds %d slots", n)
	}
	e.send(c, map[string]any{"type": "input_audio_buffer.append", "event_id": "a1", "audio": tone()})
	if er := e.wantError(c, "model_not_set", ""); er["event_id"] != "a1" {
		t.Errorf("error names event %v, want a1", er["event_id"])
	}
	e.send(c, map[string]any{"type": "input_audio_buffer.commit"})
	e.wantError(c, "input_audio_buffer_commit_empty", "") // the refused audio was not buffered
	gaInput := func(in map[string]any) map[string]any {
		return map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription", "audio": map[string]any{"input": in}}}
	}
	for _, c0 := range []struct {
		ev    any
		param string
	}{
		{map[string]any{"type": "session.update", "session": map[string]any{}}, "session.type"},
		{map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime"}}, "session.type"},
		{gaInput(map[string]any{"format": map[string]any{"type": "audio/pcmu"}}), "session.audio.input.format.type"},
		{gaInput(map[string]any{"format": map[string]any{"type": "audio/pcm", "rate": 16000}}), "session.audio.input.format.rate"},
		{gaInput(map[string]any{"noise_reduction": map[string]any{"type": "near_field"}, "transcription": map[string]any{"model": "asr"}}), "session.audio.input.noise_reduction"},
		{gaInput(map[string]any{"transcription": map[string]any{"model": "asr", "prompt": "kitchen"}}), "session.audio.input.transcription.prompt"},
		{gaInput(map[string]any{"turn_detection": map[string]any{"type": "semantic_vad"}, "transcription": map[string]any{"model": "asr"}}), "session.audio.input.turn_detection.type"},
	} {
		e.send(c, c0.ev)
		e.wantError(c, "invalid_value", c0.param)
		if n := e.slots("asr"); n != 0 {
			t.Fatalf("a refused update left %d slots held", n)
		}
	}
	e.send(c, map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription", "audio": map[string]any{"input": map[string]any{
		"format": map[string]any{"type": "audio/pcm", "rate": 24000}, "transcription": map[string]any{"model": "asr", "language": "en"},
		"turn_detection": nil, "noise_reduction": nil}}}})
	ev := e.next(c)
	if ev["type"] != "session.updated" {
		t.Fatalf("update answered %v", ev)
	}
	s, _ := ev["session"].(map[string]any)
	in, _ := s["audio"].(map[string]any)["input"].(map[string]any)
	if tr, _ := in["transcription"].(map[string]any); s["type"] != "transcription" || tr["model"] != "asr" || tr["language"] != "en" {
		t.Errorf("session.updated shows %v", s)
	}
	if n := e.slots("asr"); n != 1 {
		t.Fatalf("an admitted session holds %d slots, want 1", n)
	}
	e.send(c, map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription", "audio": map[string]any{"input": map[string]any{"transcription": map[string]any{"model": "vad"}}}}})
	e.wantError(c, "invalid_value", "session.audio.input.transcription.model")
	e.send(c, map[string]any{"type": "input_audio_buffer.append", "audio": tone()})
	e.send(c, map[string]any{"type": "input_audio_buffer.commit"})
	for _, want := range []string{"input_audio_buffer.committed", "conversation.item.input_audio_transcription.completed"} {
		for ev := e.next(c); ev["type"] != want; ev = e.next(c) {
			if ev["type"] != "conversation.item.input_audio_transcription.delta" {
				t.Fatalf("got %v waiting for %s", ev, want)
			}
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	e.awaitIdle("asr")
}

// A beta client (the OpenAI-Beta: realtime=v1 header, no intent, no
// model) gets transcription_session.created; an update naming a model
// that cannot be admitted (unknown, or one that takes no live audio) is
// an error event naming session.input_audio_transcription.model and the
// session stays open and unadmitted; one naming a live asr model admits
// it (CONTRACT.md live.late-admission, live.beta-session-update).
func TestLateAdmissionBeta(t *testing.T) {
	e := newRTEnv(t)
	e.apply("muted", "mute", "asr")
	c := e.dialQuery("", http.Header{"OpenAI-Beta": {"realtime=v1"}})
	if ev := e.next(c); ev["type"] != "transcription_session.created" {
		t.Fatalf("first event %v; want transcription_session.created", ev)
	} else if s, _ := ev["session"].(map[string]any); s["input_audio_transcription"].(map[string]any)["model"] != nil {
		t.Errorf("an unadmitted session shows a model: %v", s)
	}
	update := func(model string) map[string]any {
		return map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_format": "pcm16",
			"input_audio_transcription": map[string]any{"model": model}, "turn_detection": nil, "input_audio_noise_reduction": nil}}
	}
	e.send(c, map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_noise_reduction": map[string]any{"type": "far_field"}}})
	e.wantError(c, "invalid_value", "session.input_audio_noise_reduction")
	e.send(c, update("ghost"))
	e.wantError(c, "model_not_found", "session.input_audio_transcription.model")
	e.send(c, update("muted"))
	e.wantError(c, "live_unsupported", "session.input_audio_transcription.model")
	e.send(c, update("vad"))
	e.wantError(c, "live_unsupported", "session.input_audio_transcription.model")
	if e.slots("asr")+e.slots("muted")+e.slots("vad") != 0 {
		t.Fatal("a refused admission holds a slot")
	}
	e.send(c, update("asr"))
	if ev := e.next(c); ev["type"] != "transcription_session.updated" {
		t.Fatalf("update answered %v", ev)
	} else if s, _ := ev["session"].(map[string]any); s["input_audio_transcription"].(map[string]any)["model"] != "asr" {
		t.Errorf("updated shows %v", s)
	}
	if n := e.slots("asr"); n != 1 {
		t.Fatalf("admitted session holds %d slots", n)
	}
	// Naming the session's own model again changes nothing.
	e.send(c, update("asr"))
	if ev := e.next(c); ev["type"] != "transcription_session.updated" {
		t.Fatalf("a repeated update answered %v", ev)
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	e.awaitIdle("asr")
}

// The SDK's clients put their model in the URL without intent: the
// session is admitted at the handshake as before (live.handshake), a GA
// client's update naming the same model is taken and another is refused.
func TestURLModelWithoutIntent(t *testing.T) {
	e := newRTEnv(t)
	c := e.dialQuery("?model=asr", nil)
	if ev := e.next(c); ev["type"] != "session.created" {
		t.Fatalf("first event %v", ev)
	}
	if n := e.slots("asr"); n != 1 {
		t.Fatalf("a session named in the URL holds %d slots, want 1 from the handshake", n)
	}
	upd := func(model string) map[string]any {
		return map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription", "audio": map[string]any{"input": map[string]any{"transcription": map[string]any{"model": model}}}}}
	}
	e.send(c, upd("asr"))
	if ev := e.next(c); ev["type"] != "session.updated" {
		t.Fatalf("update answered %v", ev)
	}
	e.send(c, upd("other"))
	e.wantError(c, "invalid_value", "session.audio.input.transcription.model")
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	e.awaitIdle("asr")
}

// A session admitted late drains when a manager waits on its model, as
// one admitted at the handshake does (live.drain-unload): with a zero
// drain it closes with 1012 and the unload proceeds.
func TestLateAdmissionDrains(t *testing.T) {
	e := newRTEnv(t)
	c := e.dialQuery("?intent=transcription", nil)
	if ev := e.next(c); ev["type"] != "transcription_session.created" {
		t.Fatalf("first event %v", ev)
	}
	e.send(c, map[string]any{"type": "transcription_session.update", "session": map[string]any{"input_audio_transcription": map[string]any{"model": "asr"}}})
	if ev := e.next(c); ev["type"] != "transcription_session.updated" {
		t.Fatalf("update answered %v", ev)
	}
	done := make(chan error, 1)
	go func() { _, err := e.rt.Unload(context.Background(), "asr"); done <- err }()
	for {
		_, _, err := c.Read(e.ctx())
		if err != nil {
			if s := websocket.CloseStatus(err); s != websocket.StatusServiceRestart {
				t.Fatalf("session ended with %v (%d), want 1012", err, s)
			}
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("unload: %v", err)
	}
}

// awaitIdle waits until model's one slot is free again: a lease of its own
// is admitted only once the session released its lease.
func (e *rtEnv) awaitIdle(model string) {
	e.t.Helper()
	l, err := e.rt.AcquireTask(e.ctx(), model, "asr", nil)
	if err != nil {
		e.t.Fatalf("the session's slot on %s was not released: %v", model, err)
	}
	l.Release(false)
}

// Unadmitted sessions hold no slot, so they are bounded on their own: at
// most MaxPending at once (the next handshake without a model is 503
// too_many_pending_sessions, one naming its model still opens), and one
// that names no model within the idle limit closes with 1008 "no model
// named" although it keeps sending (CONTRACT.md live.late-admission).
func TestPendingSessionsBounded(t *testing.T) {
	e := newRTEnv(t, func(c *Config) { c.MaxPending = 2; c.Idle = 50 * time.Millisecond })
	a, b := e.dialQuery("", nil), e.dialQuery("?intent=transcription", nil)
	e.next(a)
	e.next(b)
	c, res, err := websocket.Dial(e.ctx(), "ws://"+e.addr+"/v1/realtime", nil)
	if err == nil {
		_ = c.CloseNow()
		t.Fatal("a third unadmitted session opened past MaxPending 2")
	}
	if res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third handshake: %v (%v), want 503", res, err)
	}
	var body struct{ Code string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Code != "too_many_pending_sessions" {
		t.Errorf("refusal code %q (%v)", body.Code, err)
	}
	named := e.dialQuery("?model=asr", nil)
	e.next(named)
	// a keeps sending; the deadline does not move.
	for {
		// A write may fail once the server closed; the read then says how.
		_ = a.Write(e.ctx(), websocket.MessageText, []byte(`{"type":"input_audio_buffer.clear"}`))
		_, _, err := a.Read(e.ctx())
		if err != nil {
			if s := websocket.CloseStatus(err); s != websocket.StatusPolicyViolation {
				t.Fatalf("a ended with %v, want 1008", err)
			}
			break
		}
	}
	_ = b.CloseNow()
	_ = named.CloseNow()
	e.awaitIdle("asr")
}
