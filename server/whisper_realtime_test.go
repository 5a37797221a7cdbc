package server

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// TestWhisperRealtime runs a live session on a whisper model (the tiny
// synthetic one, a partial decode every second of a turn, at most 4 s of
// unfrozen audio, so a 7 s turn freezes text before its commit): the
// deltas, concatenated, are the completed transcript's words (no delta is
// ever taken back; the last one says what the partials had not settled), two turns in a row give the same events for
// the same audio, and the session's slot is released at its close
// (live.transcribe with whisper: backends/whisper live.go).
func TestWhisperRealtime(t *testing.T) {
	if err := whisper.Available(); err != nil {
		t.Fatalf("whisper library missing: %v (run make deps)", err)
	}
	cfg := testConfig(t)
	r, err := whisper.Recipe("whisper-tiny", synth.Tiny, whisper.Seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalogue.Build(cfg.ModelsRoot, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	ts := newServerOpts(t, cfg, Options{Engines: engines.Registry(engines.Config{})}).serve()
	if err := ts.s.RegisterModels(context.Background(), []ModelEntry{{ID: "asr", Spec: ModelSpec{Engine: whisper.Name, Task: "asr",
		Checkpoint: "whisper-tiny", Slots: json.RawMessage("1"), Options: json.RawMessage(`{"oversubscribe":true,"live_step_ms":1000,"live_window_ms":3000}`)}}}); err != nil {
		t.Fatal(err)
	}
	pcm := rtAudio(t)
	turn := slices.Concat(pcm, pcm, pcm) // about 5 s
	rc := ts.dialRT("asr")
	rc.send(map[string]any{"type": "transcription_session.update", "session": map[string]any{
		"input_audio_format": "pcm16", "input_audio_transcription": map[string]any{"model": "asr", "language": "en"}, "turn_detection": nil}})
	if ev := rc.next(); ev["type"] != "transcription_session.updated" {
		t.Fatalf("update answered %v", ev)
	}
	var seen [2][]string // each turn's deltas, then its transcript
	for i := range 2 {
		rc.appendAudio(turn)
		rc.send(map[string]string{"type": "input_audio_buffer.commit"})
		done, before := rc.until("conversation.item.input_audio_transcription.completed")
		deltas := ""
		for _, ev := range before {
			switch ev["type"] {
			case "conversation.item.input_audio_transcription.delta":
				deltas += ev["delta"].(string)
				seen[i] = append(seen[i], ev["delta"].(string))
			case "input_audio_buffer.committed":
			default:
				t.Errorf("unexpected event %v", ev)
			}
		}
		text, _ := done["transcript"].(string)
		seen[i] = append(seen[i], text)
		if deltas == "" || deltas != strings.Join(strings.Fields(text), " ") {
			t.Errorf("turn %d: deltas %q do not concatenate to the transcript %q", i, deltas, text)
		}
	}
	if !slices.Equal(seen[0], seen[1]) {
		t.Errorf("the same audio gave other events in the second turn:\n%q\n%q", seen[0], seen[1])
	}
	if err := rc.c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	ts.awaitActive("asr", 0)
}
