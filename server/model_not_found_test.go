package server

import (
	"encoding/json"
	"testing"

	"github.com/coder/websocket"
)

// Every OpenAI route answers a model name that names no model (neither an
// ID nor an alias) as OpenAI does: 404 with param "model" and code
// model_not_found, so an SDK's NotFoundError says which field; a realtime
// session naming one is refused at the handshake the same way, and in an
// update with an error event of that code naming the update's field
// (CONTRACT.md err.not-found, live.handshake, live.late-admission).
func TestUnknownModelNamesModel(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("asr", `{"engine":"fixture","task":"asr","slots":1}`)
	upgrade := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	for _, c := range []struct {
		name, method, path, body string
		hdr                      []string
	}{
		{"speech", "POST", "/v1/audio/speech", `{"model":"ghost","input":"hi"}`, nil},
		{"speech stream", "POST", "/v1/audio/speech", `{"model":"ghost","input":"hi","stream_format":"sse","response_format":"pcm"}`, nil},
		{"transcriptions", "POST", "/v1/audio/transcriptions?model=ghost", "RIFF", []string{"Content-Type", "audio/wav"}},
		{"transcriptions stream", "POST", "/v1/audio/transcriptions?model=ghost&stream=true", "RIFF", []string{"Content-Type", "audio/wav"}},
		{"voice-activity", "POST", "/v1/audio/voice-activity?model=ghost", "RIFF", []string{"Content-Type", "audio/wav"}},
		{"diarization", "POST", "/v1/audio/diarization?model=ghost", "RIFF", []string{"Content-Type", "audio/wav"}},
		{"embedding", "POST", "/v1/audio/speech/embedding?model=ghost", "RIFF", []string{"Content-Type", "audio/wav"}},
		{"voices", "GET", "/v1/audio/voices?model=ghost", "", nil},
		{"models.retrieve", "GET", "/v1/models/ghost", "", nil},
		{"models.delete", "DELETE", "/v1/models/ghost", "", nil},
		{"realtime handshake", "GET", "/v1/realtime?model=ghost", "", upgrade},
		{"realtime handshake beta", "GET", "/v1/realtime?intent=transcription&model=ghost", "", upgrade},
	} {
		r := ts.do(c.method, c.path, c.body, c.hdr...)
		var b errorBody
		if err := json.Unmarshal(r.body, &b); err != nil || r.status != 404 || b.Error.Param != "model" || b.Error.Code != "model_not_found" {
			t.Errorf("%s: %d %s; want 404 param model code model_not_found", c.name, r.status, r.body)
		}
	}
	// A session that names the model in its update (the SDKs' way).
	for _, u := range []struct {
		beta        bool
		update      map[string]any
		param, open string
	}{
		{false, map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription",
			"audio": map[string]any{"input": map[string]any{"transcription": map[string]any{"model": "ghost"}}}}},
			"session.audio.input.transcription.model", "session.created"},
		{true, map[string]any{"type": "transcription_session.update", "session": map[string]any{
			"input_audio_transcription": map[string]any{"model": "ghost"}}},
			"session.input_audio_transcription.model", "transcription_session.created"},
	} {
		url := "ws://" + ts.addr + "/v1/realtime"
		if u.beta {
			url += "?intent=transcription"
		}
		c, _, err := websocket.Dial(ctxLimit(t), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		rc := &rtClient{t: t, c: c}
		if ev := rc.next(); ev["type"] != u.open {
			t.Fatalf("first event %v", ev)
		}
		rc.send(u.update)
		ev := rc.next()
		er, _ := ev["error"].(map[string]any)
		if ev["type"] != "error" || er["code"] != "model_not_found" || er["param"] != u.param {
			t.Errorf("update naming an unknown model: %v; want an error event code model_not_found param %s", ev, u.param)
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
}
