package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
	"github.com/sluice-dev/sluice/server"
)

// TestRealtimeWSClient: the ws npm package (ws@8.23.0, `make deps`)
// streams a flite-spoken sentence to GET /v1/realtime in 20 ms appends at
// four times real time; deltas arrive before the completed event, whose
// transcript has the sentence's words, and the client's close is clean
// (CONTRACT.md live.transcribe).
func TestRealtimeWSClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed: %v", err)
	}
	mods := nodeModules()
	if _, err := os.Stat(filepath.Join(mods, "ws", "package.json")); err != nil {
		missing(t, "the ws npm package is not under %s: %v", mods, err)
	}
	if err := flite.Available(); err != nil {
		missing(t, "engine library missing: %v", err) // flite speaks the test's sentence
	}
	pcmPath := filepath.Join(t.TempDir(), "speech.pcm")
	if err := os.WriteFile(pcmPath, audio.PCM16Bytes(speech24k(t, "Turn on the kitchen lights.")), 0o644); err != nil {
		t.Fatal(err)
	}

	const key = "rt-test-key"
	addr := serveSluice(t, key, nil, []string{catalogue.PocketsphinxEnUS}, []server.ModelEntry{
		{ID: "asr", Spec: server.ModelSpec{Engine: pocketsphinx.Name, Task: "asr", Checkpoint: catalogue.PocketsphinxEnUS, Slots: json.RawMessage("1")}},
	})

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "realtime.mjs")
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods, "SLUICE_SDK_API_KEY="+key, "SLUICE_RT_AUDIO="+pcmPath, "SLUICE_RT_PACE=4",
		"SLUICE_RT_URL=ws://"+addr+"/v1/realtime?intent=transcription&model=asr")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node realtime.mjs: %v\nstderr:\n%s", err, stderr.Bytes())
	}
	var got struct {
		Types      []string        `json:"types"`
		Deltas     []string        `json:"deltas"`
		Transcript string          `json:"transcript"`
		Close      int             `json:"close"`
		Error      json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("realtime.mjs printed %q: %v", b, err)
	}
	t.Logf("ws@8.23.0 against /v1/realtime: %d events, deltas %q, transcript %q, close %d", len(got.Types), got.Deltas, got.Transcript, got.Close)
	if string(got.Error) != "null" {
		t.Errorf("error: %s", got.Error)
	}
	firstDelta, completed := -1, -1
	for i, typ := range got.Types {
		switch typ {
		case "conversation.item.input_audio_transcription.delta":
			if firstDelta < 0 {
				firstDelta = i
			}
		case "conversation.item.input_audio_transcription.completed":
			completed = i
		}
	}
	if firstDelta < 0 || completed < firstDelta {
		t.Errorf("want deltas before the completed event: %v", got.Types)
	}
	for _, w := range []string{"turn", "kitchen", "lights"} {
		if !strings.Contains(got.Transcript, w) {
			t.Errorf("transcript %q lacks %q", got.Transcript, w)
		}
	}
	if got.Close != 1000 {
		t.Errorf("close code %d, want 1000", got.Close)
	}
}

// speech24k synthesises text with flite as 24 kHz PCM16.
func speech24k(t *testing.T, text string) []int16 {
	t.Helper()
	sess, _, err := flite.New().Open(context.Background(), backends.Spec{Task: "tts", Checkpoint: "slt", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	in, _ := json.Marshal(audio.TTSRequest{Text: text})
	out, err := sess.Infer(context.Background(), backends.Request{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(out.Data)
	if err != nil {
		t.Fatal(err)
	}
	return audio.Resample(a.Samples, a.Rate, 24000)
}
