package server

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/server/internal/realtime"
)

// With server_vad turn detection the VAD model finds the turns: speech
// in 20 ms appends, then silence, gives speech_started, speech_stopped,
// the commit and the completed transcript without a client commit, twice;
// the VAD lease is released with the session (CONTRACT.md
// live.turn-detection).
func TestRealtimeServerVAD(t *testing.T) {
	ts := startRealtimeWith(t, 1, true, nil)
	pcm := rtAudio(t)
	silence := make([]int16, realtime.Rate)
	rc := ts.dialRT("asr")
	rc.send(map[string]any{"type": "transcription_session.update", "session": map[string]any{
		"turn_detection": map[string]any{"type": "server_vad", "model": "vad", "silence_duration_ms": 400}}})
	ev := rc.next()
	td, _ := ev["session"].(map[string]any)["turn_detection"].(map[string]any)
	if ev["type"] != "transcription_session.updated" || td["type"] != "server_vad" {
		t.Fatalf("update answered %v", ev)
	}
	for turn := range 2 {
		rc.appendAudio(silence[:realtime.Rate/4])
		rc.appendAudio(pcm)
		rc.appendAudio(silence)
		done, before := rc.until("conversation.item.input_audio_transcription.completed")
		var order []string
		for _, ev := range before {
			if typ := ev["type"].(string); strings.HasPrefix(typ, "input_audio_buffer.") {
				order = append(order, strings.TrimPrefix(typ, "input_audio_buffer."))
				if ev["item_id"] != done["item_id"] {
					t.Errorf("turn %d: %s of item %v, completed %v", turn, typ, ev["item_id"], done["item_id"])
				}
			}
		}
		if strings.Join(order, ",") != "speech_started,speech_stopped,committed" {
			t.Errorf("turn %d: events %v", turn, order)
		}
		if text, _ := done["transcript"].(string); !strings.Contains(text, "kitchen") {
			t.Errorf("turn %d: transcript %q", turn, text)
		}
	}
	rc.send(map[string]any{"type": "transcription_session.update", "session": map[string]any{"turn_detection": nil}})
	if ev := rc.next(); ev["type"] != "error" {
		t.Errorf("turning detection off answered %v", ev)
	}
	if err := rc.c.CloseNow(); err != nil {
		t.Fatal(err)
	}
	ts.awaitActive("vad", 0)
	ts.awaitActive("asr", 0)
}

// turn_detection that cannot take effect is an error event naming it
// (CONTRACT.md live.turn-detection).
func TestRealtimeTurnDetectionErrors(t *testing.T) {
	ts := startRealtimeWith(t, 1, true, nil)
	rc := ts.dialRT("asr")
	for _, td := range []map[string]any{
		{"type": "semantic_vad"},
		{"type": "server_vad"}, // no model named, none configured
		{"type": "server_vad", "model": "asr"},
		{"type": "server_vad", "model": "vad", "threshold": 1.5},
		{"type": "server_vad", "model": "vad", "create_response": true},
	} {
		rc.send(map[string]any{"type": "transcription_session.update", "session": map[string]any{"turn_detection": td}})
		ev := rc.next()
		e, _ := ev["error"].(map[string]any)
		if ev["type"] != "error" || !strings.HasPrefix(e["param"].(string), "session.turn_detection") {
			t.Errorf("%v: answered %v", td, ev)
		}
	}
	rc.appendAudio(rtAudio(t)[:realtime.Rate/10])
	rc.send(map[string]any{"type": "transcription_session.update", "session": map[string]any{"turn_detection": map[string]any{"type": "server_vad", "model": "vad"}}})
	if ev := rc.next(); ev["type"] != "error" {
		t.Errorf("turn detection after audio answered %v", ev)
	}
	if st, _ := ts.s.Runtime().StatusOf("vad"); st.ActiveSlots != 0 {
		t.Errorf("a refused turn detection holds the VAD slot: %+v", st)
	}
}
