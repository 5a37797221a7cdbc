package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/server/internal/openai"
)

// TestAudioEndpoints drives the OpenAI-compatible task endpoints end to end
// on loopback with the real engines: flite speaks a command through
// /v1/audio/speech, pocketsphinx transcribes that WAV through
// /v1/audio/transcriptions (json and text), Silero finds speech in it
// through /v1/audio/voice-activity, and unreadable audio is a 400.
func TestAudioEndpoints(t *testing.T) {
	ts := startEngineServer(t, nil, catalogue.FliteSLT, catalogue.PocketsphinxEnUS, catalogue.SileroV5)
	s, client := ts.s, ts.client
	two := json.RawMessage("2")
	if err := s.RegisterModels(context.Background(), []ModelEntry{
		{ID: "tts", Spec: ModelSpec{Engine: "flite", Task: "tts", Checkpoint: catalogue.FliteSLT, Slots: two}},
		{ID: "asr", Spec: ModelSpec{Engine: "pocketsphinx", Task: "asr", Checkpoint: catalogue.PocketsphinxEnUS, Slots: two}},
		{ID: "vad", Spec: ModelSpec{Engine: "onnx", Task: "vad", Checkpoint: catalogue.SileroV5, Slots: two}},
	}); err != nil {
		t.Fatal(err)
	}
	url := ts.url
	post := func(path, ctype string, body []byte) (int, string, []byte) {
		t.Helper()
		resp, err := client.Post(url+path, ctype, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	upload := func(path, model, format string, wav []byte) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "speech.wav")
		_, _ = fw.Write(wav)
		_ = mw.WriteField("model", model)
		if format != "" {
			_ = mw.WriteField("response_format", format)
		}
		_ = mw.Close()
		code, _, b := post(path, mw.FormDataContentType(), buf.Bytes())
		return code, b
	}

	// form posts wav with fields (name, value pairs) to transcriptions.
	form := func(wav []byte, fields ...string) (int, string, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "speech.wav")
		_, _ = fw.Write(wav)
		for i := 0; i+1 < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		return post("/v1/audio/transcriptions", mw.FormDataContentType(), buf.Bytes())
	}

	code, ctype, wav := post("/v1/audio/speech", "application/json", []byte(`{"model":"tts","input":"Open the garage door."}`))
	if code != 200 || ctype != "audio/wav" || len(wav) < 10000 || string(wav[:4]) != "RIFF" {
		t.Fatalf("speech: %d %s %d bytes %q", code, ctype, len(wav), wav[:min(len(wav), 80)])
	}
	code, b := upload("/v1/audio/transcriptions", "asr", "", wav)
	var tr struct{ Text string }
	if code != 200 || json.Unmarshal(b, &tr) != nil {
		t.Fatalf("transcription: %d %s", code, b)
	}
	heard := 0
	for _, w := range []string{"open", "the", "garage", "door"} {
		if strings.Contains(" "+tr.Text+" ", " "+w+" ") {
			heard++
		}
	}
	if heard < 3 {
		t.Fatalf("transcript %q of %q", tr.Text, "open the garage door")
	}
	if code, b := upload("/v1/audio/transcriptions", "asr", "text", wav); code != 200 || strings.TrimSpace(string(b)) != tr.Text {
		t.Fatalf("text transcription: %d %q", code, b)
	}
	_, _, sentences := post("/v1/audio/speech", "application/json", []byte(`{"model":"tts","input":"Turn on the kitchen lights. Please open the door."}`))
	transcriptionFormats(t, form, sentences)
	// Speech in each compressed format, sent back for transcription: the
	// upload is recognised by its content and the words come back.
	for format, want := range map[string]string{"mp3": "audio/mpeg", "opus": "audio/ogg; codecs=opus", "flac": "audio/flac"} {
		code, ctype, enc := post("/v1/audio/speech", "application/json", []byte(`{"model":"tts","input":"Open the garage door.","response_format":"`+format+`"}`))
		if code != 200 || ctype != want || len(enc) >= len(wav) {
			t.Fatalf("speech as %s: %d %s, %d bytes (the WAV is %d)", format, code, ctype, len(enc), len(wav))
		}
		code, b := upload("/v1/audio/transcriptions", "asr", "", enc)
		var got struct{ Text string }
		jerr := json.Unmarshal(b, &got)
		heard := 0
		for _, w := range []string{"open", "the", "garage", "door"} {
			if strings.Contains(" "+got.Text+" ", " "+w+" ") {
				heard++
			}
		}
		if code != 200 || jerr != nil || heard < 3 {
			t.Fatalf("transcription of the %s: %d %s, want the words of %q", format, code, b, tr.Text)
		}
	}
	if code, ctype, pcm := post("/v1/audio/speech", "application/json", []byte(`{"model":"tts","input":"Open the garage door.","response_format":"pcm"}`)); code != 200 ||
		ctype != "audio/pcm; rate=24000; encoding=s16le; channels=1" || len(pcm) < (len(wav)-44)*3/2-4800 || len(pcm) > (len(wav)-44)*3/2+4800 {
		t.Fatalf("pcm: %d %s, %d bytes for a %d-byte 16 kHz WAV", code, ctype, len(pcm), len(wav))
	}
	// Streamed speech: the bytes as each sentence is synthesised, or
	// speech.audio.delta events carrying them, then speech.audio.done.
	speech := func(extra string) (int, string, []byte) {
		return post("/v1/audio/speech", "application/json", []byte(`{"model":"tts","input":"Open the garage door. Then close it."`+extra+`}`))
	}
	_, _, whole := speech(`,"response_format":"pcm"`)
	if code, ctype, got := speech(`,"response_format":"pcm","stream_format":"audio"`); code != 200 || ctype != "audio/pcm; rate=24000; encoding=s16le; channels=1" ||
		len(got)%2 != 0 || len(got) < len(whole)*9/10 || len(got) > len(whole)*11/10 {
		t.Fatalf("streamed pcm: %d %s, %d bytes (whole: %d)", code, ctype, len(got), len(whole))
	}
	if code, ctype, got := speech(`,"stream_format":"audio"`); code != 200 || ctype != "audio/wav" || string(got[:4]) != "RIFF" || len(got) < len(whole)*2/3*9/10 {
		t.Fatalf("streamed wav: %d %s, %d bytes", code, ctype, len(got))
	}
	code, ctype, events := speech(`,"response_format":"pcm","stream_format":"sse"`)
	var deltas []byte
	var last string
	for _, line := range strings.Split(string(events), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, Audio string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("sse event %q: %v", data, err)
		}
		if last = ev.Type; ev.Type == "speech.audio.delta" {
			pcm, err := base64.StdEncoding.DecodeString(ev.Audio)
			if err != nil {
				t.Fatal(err)
			}
			deltas = append(deltas, pcm...)
		}
	}
	if code != 200 || ctype != "text/event-stream" || last != "speech.audio.done" || len(deltas) < len(whole)*9/10 || len(deltas) > len(whole)*11/10 {
		t.Fatalf("sse: %d %s, last event %q, %d bytes of audio (whole: %d)", code, ctype, last, len(deltas), len(whole))
	}
	if code, _, b := speech(`,"response_format":"mp3","stream_format":"audio"`); code != 400 || !strings.Contains(string(b), "cannot be streamed") {
		t.Fatalf("streamed mp3: %d %s", code, b)
	}
	code, _, b = post("/v1/audio/voice-activity?model=vad", "audio/wav", wav)
	var vad struct {
		Segments []struct{ Start, End float64 }
	}
	if code != 200 || json.Unmarshal(b, &vad) != nil || len(vad.Segments) == 0 || vad.Segments[0].End <= vad.Segments[0].Start {
		t.Fatalf("voice activity: %d %s", code, b)
	}
	if code, b := upload("/v1/audio/transcriptions", "asr", "", []byte("not a wav file at all")); code != 400 || !strings.Contains(string(b), "invalid_request_error") {
		t.Fatalf("unreadable audio: %d %s", code, b)
	}
	if code, _, b := post("/v1/audio/speech", "application/json", []byte(`{"model":"tts","input":"hi","response_format":"aiff"}`)); code != 400 || !strings.Contains(string(b), "wav, mp3, opus, aac, flac or pcm") {
		t.Fatalf("aiff: %d %s", code, b)
	}
	if code, _, b := post("/v1/audio/speech", "application/json", []byte(`{"model":"nope","input":"hi"}`)); code != 404 {
		t.Fatalf("unknown model: %d %s", code, b)
	}
}

// transcriptionFormats checks what used to be ignored or refused: words
// and segments with times inside the audio (verbose_json with
// timestamp_granularities[]), srt and vtt cues, language checked against
// the model's, stream=true as OpenAI's events, and fields the engine
// cannot honour refused with a 400 naming them.
func transcriptionFormats(t *testing.T, form func([]byte, ...string) (int, string, []byte), wav []byte) {
	t.Helper()
	code, _, b := form(wav, "model", "asr", "response_format", "verbose_json", "timestamp_granularities[]", "word",
		"timestamp_granularities[]", "segment", "language", "en", "temperature", "0", "prompt", "")
	var v struct {
		Task, Language, Text string
		Duration             float64
		Segments             []struct {
			ID         int
			Start, End float64
			Text       string
		}
		Words []struct {
			Word       string
			Start, End float64
		}
	}
	if code != 200 || json.Unmarshal(b, &v) != nil || v.Language != "english" || len(v.Words) < 4 || len(v.Segments) != 2 {
		t.Fatalf("verbose_json: %d %s", code, b)
	}
	prev := 0.0
	for _, w := range v.Words {
		if w.Start < prev || w.End <= w.Start || w.End > v.Duration {
			t.Fatalf("word %+v out of order or outside the audio's %v s: %s", w, v.Duration, b)
		}
		prev = w.End
	}
	code, _, b = form(wav, "model", "asr", "response_format", "srt")
	if code != 200 || !strings.HasPrefix(string(b), "1\n00:00:0") || !strings.Contains(string(b), " --> 00:00:0") ||
		!strings.Contains(string(b), "\n\n2\n00:00:0") || !strings.Contains(string(b), ","+fmt.Sprintf("%03d", int(v.Segments[1].Start*1000+0.5)%1000)) {
		t.Fatalf("srt: %d %q", code, b)
	}
	code, _, b = form(wav, "model", "asr", "response_format", "vtt")
	if code != 200 || !strings.HasPrefix(string(b), "WEBVTT\n\n00:00:0") || !strings.Contains(string(b), ".") || strings.Contains(string(b), ",") {
		t.Fatalf("vtt: %d %q", code, b)
	}
	for _, bad := range [][]string{
		{"language", "fr"}, {"prompt", "kitchen"}, {"temperature", "0.8"}, {"include[]", "logprobs"}, {"chunking_strategy", "auto"},
		{"timestamp_granularities[]", "word"}, {"stream", "maybe"},
	} {
		code, _, b := form(wav, "model", "asr", bad[0], bad[1])
		if code != 400 || !strings.Contains(string(b), bad[0]) || !strings.Contains(string(b), "invalid_request_error") {
			t.Fatalf("%s=%s: %d %s, want 400 naming it", bad[0], bad[1], code, b)
		}
	}
	code, ctype, b := form(wav, "model", "asr", "stream", "true")
	if code != 200 || ctype != "text/event-stream" {
		t.Fatalf("stream: %d %s %s", code, ctype, b)
	}
	var deltas strings.Builder
	var done string
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct{ Type, Delta, Text string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		switch ev.Type {
		case "transcript.text.delta":
			deltas.WriteString(ev.Delta)
		case "transcript.text.done":
			done = ev.Text
		default:
			t.Fatalf("event type %q", ev.Type)
		}
	}
	if done != v.Text || deltas.String() != done || !strings.HasSuffix(strings.TrimSpace(string(b)), "data: [DONE]") {
		t.Fatalf("stream events %q (deltas %q, want done %q)", b, deltas.String(), v.Text)
	}
}

// Transcription fields are checked before any lease or engine call: an
// unknown one, a value the engine cannot honour, or more than
// openai.MaxFormFields fields is a 400 naming it, and the engine never sees the
// request. They used to be read past (discarded) and answered 200.
func TestTranscriptionFieldsCheckedFirst(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	form := uploadForm
	many := []string{"model", "asr"}
	for i := range openai.MaxFormFields {
		many = append(many, "prompt", strconv.Itoa(i))
	}
	for _, c := range []struct {
		name   string
		fields []string
	}{
		{"foo", []string{"model", "asr", "foo", "bar"}},
		// prompt and temperature go to the engine (whisper honours them,
		// others refuse them naming the field); what no engine could take
		// is refused here.
		{"prompt", []string{"model", "asr", "prompt", strings.Repeat("say kitchen ", 400)}},
		{"temperature", []string{"model", "asr", "temperature", "1.5"}},
		{"model", []string{"model", "asr", "model", "asr"}},
		{"fields", many},
	} {
		ctype, body := form(c.fields...)
		r := ts.must(http.StatusBadRequest, "POST", "/v1/audio/transcriptions", body, "Content-Type", ctype)
		if r.errType(t) != "invalid_request_error" || !strings.Contains(string(r.body), c.name) {
			t.Fatalf("%s: %s", c.name, r.body)
		}
	}
	ts.must(http.StatusBadRequest, "POST", "/v1/audio/transcriptions?model=asr&foo=1", "RIFF-payload", "Content-Type", "audio/wav")
	eng.mu.Lock()
	n := len(eng.seen)
	eng.mu.Unlock()
	if n != 0 {
		t.Fatalf("the engine saw %d requests", n)
	}
	ctype, body := form("model", "asr", "temperature", "0", "prompt", "")
	ts.must(http.StatusOK, "POST", "/v1/audio/transcriptions", body, "Content-Type", ctype)
}
