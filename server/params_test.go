package server

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/server/internal/openai"
)

// Speech's instructions used to be accepted and dropped (200, the same
// audio as without them): no engine here can be instructed, so a
// non-empty one is a 400 naming it, before any lease; an empty one is
// what not sending it means.
func TestSpeechInstructionsRefused(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	ts.put("tts", `{"engine":"blobcheck","task":"tts"}`)
	r := ts.must(http.StatusBadRequest, "POST", "/v1/audio/speech", `{"model":"tts","input":"hi","instructions":"speak cheerfully"}`,
		"Content-Type", "application/json")
	if r.errType(t) != "invalid_request_error" || !strings.Contains(string(r.body), "instructions") {
		t.Fatalf("%s", r.body)
	}
	eng.mu.Lock()
	n := len(eng.seen)
	eng.mu.Unlock()
	if n != 0 {
		t.Fatalf("the engine saw %d requests", n)
	}
	if _, err := (openai.SpeechParams{Model: "tts", Input: "hi", Instructions: ""}).Request(); err != nil {
		t.Fatalf("empty instructions: %v", err)
	}
}

// uploadForm is an upload endpoint's multipart body with fields (name,
// value pairs) and a small file payload.
func uploadForm(fields ...string) (string, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	fw, _ := mw.CreateFormFile("file", "a.wav")
	_, _ = fw.Write([]byte("RIFF-payload"))
	_ = mw.Close()
	return mw.FormDataContentType(), buf.String()
}

// Voice-activity fields used to be read past: any field but model was
// dropped and answered 200. Now an unknown field, a response_format other
// than json, a value that is not a number, or a repeated field is a 400
// naming it, and the engine never sees the request; threshold,
// min_speech_ms, min_silence_ms and speech_pad_ms reach the engine's
// input (audio.VADRequest), from the form or the query.
func TestVoiceActivityFieldsCheckedFirst(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	ts.put("vad", `{"engine":"blobcheck","task":"vad"}`)
	for _, c := range []struct {
		name   string
		fields []string
	}{
		{"foo", []string{"model", "vad", "foo", "bar"}},
		{"response_format", []string{"model", "vad", "response_format", "text"}},
		{"threshold", []string{"model", "vad", "threshold", "loud"}},
		{"threshold", []string{"model", "vad", "threshold", "1.5"}},
		{"min_speech_ms", []string{"model", "vad", "min_speech_ms", "-3"}},
		{"speech_pad_ms", []string{"model", "vad", "speech_pad_ms", "1.5"}},
		{"model", []string{"model", "vad", "model", "vad"}},
	} {
		ctype, body := uploadForm(c.fields...)
		r := ts.must(http.StatusBadRequest, "POST", "/v1/audio/voice-activity", body, "Content-Type", ctype)
		if r.errType(t) != "invalid_request_error" || !strings.Contains(string(r.body), c.name) {
			t.Fatalf("%s: %s", c.name, r.body)
		}
	}
	r := ts.must(http.StatusBadRequest, "POST", "/v1/audio/voice-activity?model=vad&language=en", "RIFF-payload", "Content-Type", "audio/wav")
	if !strings.Contains(string(r.body), "language") {
		t.Fatalf("%s", r.body)
	}
	eng.mu.Lock()
	n := len(eng.seen)
	eng.mu.Unlock()
	if n != 0 {
		t.Fatalf("the engine saw %d requests", n)
	}

	input := func() audio.VADRequest {
		t.Helper()
		var v audio.VADRequest
		if err := json.Unmarshal([]byte(eng.last(t).input), &v); err != nil {
			t.Fatalf("engine input %q: %v", eng.last(t).input, err)
		}
		return v
	}
	ctype, body := uploadForm("model", "vad", "response_format", "json", "threshold", "0.7", "min_speech_ms", "120",
		"min_silence_ms", "300", "speech_pad_ms", "20")
	ts.must(http.StatusOK, "POST", "/v1/audio/voice-activity", body, "Content-Type", ctype)
	if got, want := input(), (audio.VADRequest{Threshold: 0.7, MinSpeechMS: 120, MinSilenceMS: 300, SpeechPadMS: 20}); got != want {
		t.Fatalf("engine input %+v, want %+v", got, want)
	}
	// A declared L16 rate and a query override travel together.
	ts.must(http.StatusOK, "POST", "/v1/audio/voice-activity?model=vad&threshold=0.25", "\x00\x00\x00\x00", "Content-Type", "audio/L16; rate=16000")
	if got, want := input(), (audio.VADRequest{SampleRate: 16000, Threshold: 0.25}); got != want {
		t.Fatalf("engine input %+v, want %+v", got, want)
	}
	// No override (fields sent empty are not overrides): the input is what
	// the upload declared (nothing here).
	ctype, body = uploadForm("model", "vad", "threshold", "", "response_format", "")
	ts.must(http.StatusOK, "POST", "/v1/audio/voice-activity", body, "Content-Type", ctype)
	if in := eng.last(t).input; in != "" {
		t.Fatalf("engine input %q, want none", in)
	}
}

// Speech's speed and voice take effect with a real engine (flite): speed
// 2 is a shorter synthesis than speed 1, and 0.5 a longer one; the
// model's voice and OpenAI's stock names speak; an unknown voice is a 400
// naming it and the model's voice.
func TestSpeechSpeedAndVoiceTakeEffect(t *testing.T) {
	ts := fliteServer(t)
	ts.put("a", `{"engine":"flite","task":"tts","checkpoint":"slt","slots":1}`)
	length := func(extra string) int {
		t.Helper()
		r := ts.must(http.StatusOK, "POST", "/v1/audio/speech", `{"model":"a","input":"The quick brown fox jumps over the lazy dog."`+extra+`}`,
			"Content-Type", "application/json")
		return len(r.body)
	}
	normal, fast, slow := length(``), length(`,"speed":2`), length(`,"speed":0.5`)
	if !(fast < normal*3/4 && slow > normal*5/4) {
		t.Fatalf("speed 0.5, 1, 2: %d, %d, %d bytes of wav", slow, normal, fast)
	}
	if n := length(`,"voice":"slt"`); n != normal {
		t.Fatalf("voice slt: %d bytes, the default %d", n, normal)
	}
	if n := length(`,"voice":"alloy"`); n != normal {
		t.Fatalf("voice alloy: %d bytes, the default %d", n, normal)
	}
	e := rawError(t, ts.must(http.StatusBadRequest, "POST", "/v1/audio/speech", `{"model":"a","input":"hi","voice":"zira"}`,
		"Content-Type", "application/json"))
	if msg := e["message"].(string); !strings.Contains(msg, `"zira"`) || !strings.Contains(msg, "have slt") || e["param"] != "voice" {
		t.Fatalf("%q", msg)
	}
}
