package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// TestWhisperTranscriptions drives the whisper engine (tiny synthetic
// model, 2 slots) through /v1/audio/transcriptions: verbose_json's words
// and segments come from whisper's own timings, srt and vtt cues from its
// segments; a damaged model file is refused with an error naming the
// damage while the loaded model goes on serving (whisper.corrupt-model).
func TestWhisperTranscriptions(t *testing.T) {
	if err := whisper.Available(); err != nil {
		t.Fatalf("whisper library missing: %v (run make deps)", err)
	}
	root := t.TempDir()
	good, err := whisper.Recipe("whisper-tiny", synth.Tiny, whisper.Seed, 2)
	if err != nil {
		t.Fatal(err)
	}
	broken, _ := whisper.Recipe("whisper-broken", synth.Tiny, whisper.Seed, 2)
	b := append([]byte(nil), good.Files[0].Content...)
	binary.LittleEndian.PutUint32(b[4:], 7) // n_vocab: no Whisper vocabulary
	broken.Files[0].Content = b
	if _, err := catalogue.Build(root, []catalogue.Recipe{good, broken}); err != nil {
		t.Fatal(err)
	}
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatalf("jfk.wav (make deps): %v", err)
	}
	cfg := DefaultConfig()
	cfg.ParallelJobs, cfg.ModelsRoot = true, root
	s, err := New(cfg, Options{Engines: engines.Registry(engines.Config{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer func() {
		client.CloseIdleConnections()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	two := json.RawMessage("2")
	if err := s.RegisterModels(context.Background(), []ModelEntry{
		{ID: "asr", Spec: ModelSpec{Engine: "whisper", Task: "asr", Checkpoint: "whisper-tiny", Slots: two, Options: json.RawMessage(`{"oversubscribe":true}`)}},
	}); err != nil {
		t.Fatal(err)
	}
	form := func(fields ...string) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "jfk.wav")
		_, _ = fw.Write(wav)
		for i := 0; i+1 < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		resp, err := client.Post("http://"+ln.Addr().String()+"/v1/audio/transcriptions", mw.FormDataContentType(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := form("model", "asr", "response_format", "verbose_json", "timestamp_granularities[]", "word", "timestamp_granularities[]", "segment")
	var v struct {
		Language, Text string
		Duration       float64
		Segments       []struct {
			Start, End float64
			Text       string
		}
		Words []struct {
			Word       string
			Start, End float64
		}
	}
	if code != 200 || json.Unmarshal(body, &v) != nil || v.Language == "" || v.Text == "" || len(v.Words) < 2 || len(v.Segments) == 0 || v.Duration != 11 {
		t.Fatalf("verbose_json: %d %s", code, body)
	}
	prev := 0.0
	for _, w := range v.Words {
		if w.Start < prev || w.End < w.Start || w.End > v.Duration {
			t.Fatalf("word %+v out of order or outside the audio: %s", w, body)
		}
		prev = w.End
	}
	if code, b := form("model", "asr", "response_format", "srt"); code != 200 || !strings.HasPrefix(string(b), "1\n00:00:00,000 --> 00:00:") {
		t.Fatalf("srt: %d %q", code, b)
	}
	if code, b := form("model", "asr", "response_format", "vtt"); code != 200 || !strings.HasPrefix(string(b), "WEBVTT\n\n00:00:00.000 --> 00:00:") {
		t.Fatalf("vtt: %d %q", code, b)
	}
	if code, b := form("model", "asr", "response_format", "text"); code != 200 || strings.TrimSpace(string(b)) != v.Text {
		t.Fatalf("text: %d %q, want %q", code, b, v.Text)
	}
	err = s.RegisterModels(context.Background(), []ModelEntry{
		{ID: "broken", Spec: ModelSpec{Engine: "whisper", Task: "asr", Checkpoint: "whisper-broken", Slots: json.RawMessage("1")}},
	})
	if err == nil || !strings.Contains(err.Error(), "n_vocab 7") {
		t.Fatalf("damaged model: %v, want an error naming n_vocab", err)
	}
	if code, b := form("model", "asr"); code != 200 || !strings.Contains(string(b), v.Text) {
		t.Fatalf("after the damaged model: %d %s", code, b)
	}
}
