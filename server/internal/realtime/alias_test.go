package realtime

import (
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/core/runtime"
)

// A session may name its model by an alias (OpenAI's gpt-4o-transcribe
// mapped to a served model), in the URL or in either dialect's update:
// it is admitted on the model the alias names, holds its slot, and its
// turns are transcribed; an update naming the same alias again (the SDKs
// send the whole session config with every update), or the model's own
// ID, is the same model, never "another model"; a name that leads to
// another model is still refused (CONTRACT.md names.alias-resolve,
// live.late-admission).
func TestAliasSessions(t *testing.T) {
	e := newRTEnv(t)
	if _, err := e.rt.Apply(context.Background(), "asr", runtime.ModelSpec{Engine: "fixture", Task: "asr", Checkpoint: "ck", Slots: 1,
		Aliases: []string{"gpt-4o-transcribe", "whisper-1"}}); err != nil {
		t.Fatal(err)
	}
	ga := func(model string) map[string]any {
		return map[string]any{"type": "session.update", "session": map[string]any{"type": "transcription",
			"audio": map[string]any{"input": map[string]any{"transcription": map[string]any{"model": model}}}}}
	}
	beta := func(model string) map[string]any {
		return map[string]any{"type": "transcription_session.update", "session": map[string]any{
			"input_audio_transcription": map[string]any{"model": model}}}
	}
	for _, c := range []struct {
		name, query     string
		header          http.Header
		created, update string
		upd             func(string) map[string]any
		param           string
		urlAdmits       bool
	}{
		{"GA update", "", nil, "session.created", "session.updated", ga, "session.audio.input.transcription.model", false},
		{"beta update", "?intent=transcription", nil, "transcription_session.created", "transcription_session.updated", beta, "session.input_audio_transcription.model", false},
		{"GA URL", "?model=gpt-4o-transcribe", nil, "session.created", "session.updated", ga, "session.audio.input.transcription.model", true},
		{"beta URL", "?intent=transcription&model=gpt-4o-transcribe", nil, "transcription_session.created", "transcription_session.updated", beta, "session.input_audio_transcription.model", true},
	} {
		func() {
			conn := e.dialQuery(c.query, c.header)
			defer func() { _ = conn.CloseNow() }()
			if ev := e.next(conn); ev["type"] != c.created {
				t.Fatalf("%s: first event %v; want %s", c.name, ev, c.created)
			}
			want := 0
			if c.urlAdmits {
				want = 1
			}
			if n := e.slots("asr"); n != want {
				t.Fatalf("%s: after the handshake the session holds %d slots, want %d", c.name, n, want)
			}
			for _, name := range []string{"gpt-4o-transcribe", "gpt-4o-transcribe", "asr", "whisper-1"} {
				e.send(conn, c.upd(name))
				if ev := e.next(conn); ev["type"] != c.update {
					t.Fatalf("%s: update naming %q answered %v", c.name, name, ev)
				}
				if n := e.slots("asr"); n != 1 {
					t.Fatalf("%s: after an update naming %q the session holds %d slots, want 1", c.name, name, n)
				}
			}
			e.send(conn, c.upd("vad"))
			e.wantError(conn, "invalid_value", c.param)
			e.send(conn, map[string]any{"type": "input_audio_buffer.append", "audio": tone()})
			e.send(conn, map[string]any{"type": "input_audio_buffer.commit"})
			for _, want := range []string{"input_audio_buffer.committed", "conversation.item.input_audio_transcription.completed"} {
				for ev := e.next(conn); ev["type"] != want; ev = e.next(conn) {
					if ev["type"] != "conversation.item.input_audio_transcription.delta" {
						t.Fatalf("%s: got %v waiting for %s", c.name, ev, want)
					}
				}
			}
			if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
				t.Fatal(err)
			}
			e.awaitIdle("asr")
		}()
	}
}
