package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

// whisperServer serves the tiny synthetic whisper model as "ml" (2
// slots), an English-only one as "en" and a 1-slot "one" on loopback.
type whisperServer struct {
	t      *testing.T
	addr   string
	root   string
	client *http.Client
	wav    []byte
}

func newWhisperServer(t *testing.T) *whisperServer {
	t.Helper()
	if err := whisper.Available(); err != nil {
		t.Fatalf("whisper library missing: %v (run make deps)", err)
	}
	root := t.TempDir()
	ml, err := whisper.Recipe("whisper-tiny", synth.Tiny, whisper.Seed, 2)
	if err != nil {
		t.Fatal(err)
	}
	d := synth.Tiny
	d.Vocab = synth.VocabEn
	en, err := whisper.Recipe("whisper-tiny-en", d, whisper.Seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	one, err := whisper.Recipe("whisper-one", synth.Tiny, whisper.Seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalogue.Build(root, []catalogue.Recipe{ml, en, one}); err != nil {
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
	ws := &whisperServer{t: t, addr: ln.Addr().String(), root: root, client: &http.Client{Transport: &http.Transport{}}, wav: wav}
	t.Cleanup(func() {
		ws.client.CloseIdleConnections()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	opts := json.RawMessage(`{"oversubscribe":true}`)
	if err := s.RegisterModels(context.Background(), []ModelEntry{
		{ID: "ml", Spec: ModelSpec{Engine: "whisper", Task: "asr", Checkpoint: "whisper-tiny", Slots: json.RawMessage("2"), Options: opts}},
		{ID: "en", Spec: ModelSpec{Engine: "whisper", Task: "asr", Checkpoint: "whisper-tiny-en", Slots: json.RawMessage("1"), Options: opts}},
		{ID: "one", Spec: ModelSpec{Engine: "whisper", Task: "asr", Checkpoint: "whisper-one", Slots: json.RawMessage("1"), Options: opts}},
	}); err != nil {
		t.Fatal(err)
	}
	return ws
}

// post sends an upload of audio to path with the form fields.
func (ws *whisperServer) post(ctx context.Context, path string, audio []byte, fields ...string) (*http.Response, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "clip.wav")
	_, _ = fw.Write(audio)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+ws.addr+path, &buf)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return ws.client.Do(req)
}

func (ws *whisperServer) form(path string, fields ...string) (int, string) {
	ws.t.Helper()
	resp, err := ws.post(context.Background(), path, ws.wav, fields...)
	if err != nil {
		ws.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWhisperOpenAISurface (the translations route and the whisper
// fields): translations in every response_format from the multilingual
// model, a 400 naming why from the English-only one and naming an
// unknown field; the detected language's probability in verbose_json;
// prompt (bounded, named when over) and temperature (reproducible);
// stream=true's deltas concatenating to the done event's text.
func TestWhisperOpenAISurface(t *testing.T) {
	ws := newWhisperServer(t)
	const tr = "/v1/audio/translations"
	for _, f := range []string{"json", "text", "verbose_json", "srt", "vtt"} {
		code, body := ws.form(tr, "model", "ml", "response_format", f)
		if code != 200 || len(strings.TrimSpace(body)) == 0 {
			t.Fatalf("translation %s: %d %s", f, code, body)
		}
		if f == "verbose_json" && !strings.Contains(body, `"task":"translate"`) {
			t.Fatalf("verbose_json translation lacks its task: %s", body)
		}
	}
	if code, body := ws.form(tr, "model", "en"); code != 400 || !strings.Contains(body, "English-only") {
		t.Fatalf("English-only translation: %d %s", code, body)
	}
	if code, body := ws.form(tr, "model", "ml", "language", "de"); code != 400 || !strings.Contains(body, "language") {
		t.Fatalf("translation with language: %d %s", code, body)
	}
	const tx = "/v1/audio/transcriptions"
	code, body := ws.form(tx, "model", "ml", "response_format", "verbose_json")
	var v struct {
		Language            string  `json:"language"`
		LanguageProbability float64 `json:"language_probability"`
		Text                string  `json:"text"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.Language == "" || !(v.LanguageProbability > 0 && v.LanguageProbability <= 1) {
		t.Fatalf("detected language: %d %s", code, body)
	}
	if code, body := ws.form(tx, "model", "ml", "prompt", strings.Repeat("many words here ", 40)); code != 400 || !strings.Contains(body, "prompt") {
		t.Fatalf("long prompt: %d %s", code, body)
	}
	c1, hot1 := ws.form(tx, "model", "ml", "temperature", "0.6", "response_format", "verbose_json")
	ws.form(tx, "model", "ml", "prompt", "other work between")
	c2, hot2 := ws.form(tx, "model", "ml", "temperature", "0.6", "response_format", "verbose_json")
	if c1 != 200 || hot1 != hot2 {
		t.Fatalf("temperature 0.6 twice: %d %s\n%d %s", c1, hot1, c2, hot2)
	}
	// stream=true: transcript.text.delta events as segments are decoded,
	// then transcript.text.done with their concatenation.
	resp, err := ws.post(context.Background(), tx, ws.wav, "model", "ml", "stream", "true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var deltas strings.Builder
	var done string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var e struct{ Type, Delta, Text string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "transcript.text.delta":
			deltas.WriteString(e.Delta)
		case "transcript.text.done":
			done = e.Text
		}
	}
	if done == "" || deltas.String() != done {
		t.Fatalf("stream: deltas %q, done %q", deltas.String(), done)
	}
}

// TestWhisperDisconnectFreesSlot (whisper.cancel-mid-decode over HTTP): a
// client that goes away while its 90 s clip is being decoded on the only
// slot frees the slot (the abort callback between graph nodes), so the
// next request is served; the time from the disconnect to that next
// answer is logged.
func TestWhisperDisconnectFreesSlot(t *testing.T) {
	ws := newWhisperServer(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	defer whisper.NotifyDecodes(filepath.Join(ws.root, "whisper-one", whisper.ModelFile), w)()
	long := longWAV(t, ws.wav, 90)
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		resp, err := ws.post(ctx, "/v1/audio/transcriptions", long, "model", "one")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("answered %d %s", resp.StatusCode, b)
			gone <- nil
			t.Errorf("the long request was answered before the cancel: %v", err)
			return
		}
		gone <- err
	}()
	started := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := r.Read(b[:]) // whisper is decoding the long clip
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-gone:
		t.Fatal("the long request ended before whisper decoded it")
	}
	t0 := time.Now()
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the cancelled request was answered")
	}
	// Bounded: a slot that never came back fails here, not by hanging.
	next, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	resp, err := ws.post(next, "/v1/audio/transcriptions", longWAV(t, ws.wav, 2), "model", "one")
	if err != nil {
		t.Fatalf("the next request: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the next request: %d %s", resp.StatusCode, body)
	}
	t.Logf("disconnect mid-decode to the next answer on the freed slot (a 2 s clip's decode included): %v", time.Since(t0))
}

// longWAV is jfk.wav's speech repeated to seconds, as a 16 kHz WAV file.
func longWAV(t *testing.T, wav []byte, seconds int) []byte {
	t.Helper()
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int16, seconds*16000)
	for i := range out {
		out[i] = a.Samples[i%len(a.Samples)]
	}
	return audio.WAV(16000, out)
}
