package server

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// form is a multipart body with a file part (unless file is nil) and
// fields (name, value pairs), and its Content-Type header.
func form(file []byte, fields ...string) (body string, hdr []string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "speech.wav")
		_, _ = fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	_ = mw.Close()
	return buf.String(), []string{"Content-Type", mw.FormDataContentType()}
}

// namesServer serves flite (tts), pocketsphinx (asr) and Silero (vad)
// models under OpenAI's model names as aliases.
func namesServer(t *testing.T) *tserver {
	t.Helper()
	ts := startEngineServer(t, nil, catalogue.FliteSLT, catalogue.PocketsphinxEnUS, catalogue.SileroV5)
	ts.put("tts", `{"engine":"flite","task":"tts","checkpoint":"`+catalogue.FliteSLT+`","aliases":["tts-1","tts-1-hd","gpt-4o-mini-tts"]}`)
	ts.put("asr", `{"engine":"pocketsphinx","task":"asr","checkpoint":"`+catalogue.PocketsphinxEnUS+`","aliases":["whisper-1","gpt-4o-transcribe","gpt-4o-mini-transcribe"]}`)
	ts.put("vad", `{"engine":"onnx","task":"vad","checkpoint":"`+catalogue.SileroV5+`"}`)
	return ts
}

// An app written for OpenAI runs unchanged: its model names are aliases
// that every route resolves, GET /v1/models lists each as an entry of
// its own, and every stock voice (marin and cedar too, and the SDK's
// {"id"} form) speaks (CONTRACT.md names.alias-resolve, names.alias-list).
func TestOpenAINamesAndVoices(t *testing.T) {
	ts := namesServer(t)
	var list ModelList
	ts.must(200, "GET", "/v1/models", "").json(t, &list)
	names := map[string]string{}
	for _, m := range list.Data {
		names[m.ID] = m.AliasOf
	}
	want := map[string]string{"tts": "", "asr": "", "vad": "", "tts-1": "tts", "tts-1-hd": "tts", "gpt-4o-mini-tts": "tts",
		"whisper-1": "asr", "gpt-4o-transcribe": "asr", "gpt-4o-mini-transcribe": "asr"}
	if len(names) != len(want) || len(list.Data) != len(want) {
		t.Fatalf("listed %v, want %v", names, want)
	}
	for id, of := range want {
		if got, ok := names[id]; !ok || got != of {
			t.Errorf("%s: alias_of %q (listed %v), want %q", id, got, ok, of)
		}
	}
	if m := ts.model("tts"); strings.Join(m.Aliases, ",") != "gpt-4o-mini-tts,tts-1,tts-1-hd" {
		t.Errorf("tts aliases %q", m.Aliases)
	}
	var m Model
	ts.must(200, "GET", "/v1/models/whisper-1", "").json(t, &m)
	if m.ID != "whisper-1" || m.AliasOf != "asr" || m.Task != "asr" {
		t.Errorf("retrieve alias: %+v", m)
	}

	var wav []byte
	for _, voice := range []string{`"marin"`, `"cedar"`, `"alloy"`, `{"id":"verse"}`, `"slt"`} {
		r := ts.must(200, "POST", "/v1/audio/speech", `{"model":"tts-1","input":"Open the garage door.","voice":`+voice+`}`,
			"Content-Type", "application/json")
		if string(r.body[:4]) != "RIFF" {
			t.Fatalf("voice %s: not a WAV", voice)
		}
		if wav == nil {
			wav = r.body
		} else if voice != `"slt"` && !bytes.Equal(r.body, wav) {
			t.Errorf("voice %s: not the model's default voice", voice)
		}
	}
	e := rawError(t, ts.must(400, "POST", "/v1/audio/speech", `{"model":"tts-1","input":"hi","voice":"klingon"}`, "Content-Type", "application/json"))
	if e["param"] != "voice" || e["code"] == nil || !strings.Contains(e["message"].(string), "have slt") {
		t.Errorf("unknown voice: %v", e)
	}
	body, hdr := form(wav, "model", "whisper-1")
	var tr struct{ Text string }
	ts.must(200, "POST", "/v1/audio/transcriptions", body, hdr...).json(t, &tr)
	if !strings.Contains(tr.Text, "garage") {
		t.Errorf("transcript %q", tr.Text)
	}
	var res wire.InferResult
	ts.must(200, "POST", "/v1/models/tts-1/infer", `{"input":{"text":"hi"}}`, "Content-Type", "application/json").json(t, &res)
	if res.ContentType != "audio/wav" {
		t.Errorf("infer through an alias: %+v", res.ContentType)
	}
	ts.must(200, "GET", "/v2/models/whisper-1", "")
	ts.must(200, "GET", "/v2/models/whisper-1/ready", "")
	ts.must(200, "GET", "/v1/audio/voices?model=tts-1", "")

	// A name is one model's (CONTRACT.md names.alias-conflict).
	e = rawError(t, ts.must(409, "PUT", "/v1/models/vad", `{"engine":"onnx","task":"vad","checkpoint":"`+catalogue.SileroV5+`","aliases":["whisper-1"]}`))
	if e["param"] != "aliases" || e["code"] != "alias_conflict" || !strings.Contains(e["message"].(string), `model "asr"`) {
		t.Errorf("alias conflict: %v", e)
	}
	e = rawError(t, ts.must(409, "PUT", "/v1/models/vad", `{"engine":"onnx","task":"vad","checkpoint":"`+catalogue.SileroV5+`","aliases":["tts"]}`))
	if e["param"] != "aliases" || e["code"] != "alias_conflict" {
		t.Errorf("alias that is an ID: %v", e)
	}
	e = rawError(t, ts.must(409, "PUT", "/v1/models/tts-1", `{"engine":"fixture"}`))
	if e["param"] != "model" || e["code"] != "alias_conflict" {
		t.Errorf("ID that is an alias: %v", e)
	}
	e = rawError(t, ts.must(400, "PUT", "/v1/models/vad", `{"engine":"onnx","task":"vad","checkpoint":"`+catalogue.SileroV5+`","aliases":["a b"]}`))
	if e["param"] != "aliases" {
		t.Errorf("bad alias: %v", e)
	}
	var spec ModelSpec
	if err := json.Unmarshal(ts.must(200, "GET", "/v1/models/asr/spec", "").body, &spec); err != nil ||
		strings.Join(spec.Aliases, ",") != "gpt-4o-mini-transcribe,gpt-4o-transcribe,whisper-1" {
		t.Errorf("spec aliases %q %v", spec.Aliases, err)
	}
}

// Every 400 of the OpenAI routes names the field at fault (param) and
// has a code, whatever is wrong: a missing model, a bad response_format,
// voice, speed, file or an unknown field.
func TestOpenAIRoutes400NameTheirField(t *testing.T) {
	ts := namesServer(t)
	wav := ts.must(200, "POST", "/v1/audio/speech", `{"model":"tts","input":"Open the door."}`, "Content-Type", "application/json").body
	type c struct {
		name, path, body string
		hdr              []string
		param            string
	}
	jsonHdr := []string{"Content-Type", "application/json"}
	cases := []c{
		{"speech: no model", "/v1/audio/speech", `{"input":"hi"}`, jsonHdr, "model"},
		{"speech: no input", "/v1/audio/speech", `{"model":"tts"}`, jsonHdr, "input"},
		{"speech: response_format", "/v1/audio/speech", `{"model":"tts","input":"hi","response_format":"wma"}`, jsonHdr, "response_format"},
		{"speech: voice", "/v1/audio/speech", `{"model":"tts","input":"hi","voice":"klingon"}`, jsonHdr, "voice"},
		{"speech: voice object", "/v1/audio/speech", `{"model":"tts","input":"hi","voice":{"name":"x"}}`, jsonHdr, "voice"},
		{"speech: speed", "/v1/audio/speech", `{"model":"tts","input":"hi","speed":9}`, jsonHdr, "speed"},
		{"speech: speed type", "/v1/audio/speech", `{"model":"tts","input":"hi","speed":"fast"}`, jsonHdr, "speed"},
		{"speech: stream_format", "/v1/audio/speech", `{"model":"tts","input":"hi","stream_format":"x"}`, jsonHdr, "stream_format"},
		{"speech: sample_rate", "/v1/audio/speech", `{"model":"tts","input":"hi","sample_rate":1}`, jsonHdr, "sample_rate"},
		{"speech: instructions", "/v1/audio/speech", `{"model":"tts","input":"hi","instructions":"sing"}`, jsonHdr, "instructions"},
		{"speech: unknown field", "/v1/audio/speech", `{"model":"tts","input":"hi","colour":1}`, jsonHdr, "colour"},
		{"speech: wrong task", "/v1/audio/speech", `{"model":"asr","input":"hi"}`, jsonHdr, "model"},
	}
	for _, route := range []string{"/v1/audio/transcriptions", "/v1/audio/voice-activity"} {
		model := map[string]string{"/v1/audio/transcriptions": "asr", "/v1/audio/voice-activity": "vad"}[route]
		add := func(name, param string, file []byte, fields ...string) {
			body, hdr := form(file, fields...)
			cases = append(cases, c{route + ": " + name, route, body, hdr, param})
		}
		add("no model", "model", wav)
		add("no file", "file", nil, "model", model)
		add("bad file", "file", []byte("not audio at all, not even close"), "model", model)
		add("response_format", "response_format", wav, "model", model, "response_format", "docx")
		add("unknown field", "colour", wav, "model", model, "colour", "red")
		add("field twice", "model", wav, "model", model, "model", model)
		add("wrong task", "model", wav, "model", "tts")
	}
	for _, route := range []string{"/v1/audio/diarization", "/v1/audio/speech/embedding"} {
		add := func(name, param string, file []byte, fields ...string) {
			body, hdr := form(file, fields...)
			cases = append(cases, c{route + ": " + name, route, body, hdr, param})
		}
		add("no model", "model", wav)
		add("no file", "file", nil, "model", "asr")
		add("unknown field", "colour", wav, "model", "asr", "colour", "red")
		add("field twice", "model", wav, "model", "asr", "model", "asr")
		add("wrong task", "model", wav, "model", "asr")
	}
	body, hdr := form(wav, "model", "asr", "response_format", "docx")
	cases = append(cases, c{"diarization: response_format", "/v1/audio/diarization", body, hdr, "response_format"})
	for _, k := range cases {
		r := ts.do("POST", k.path, k.body, k.hdr...)
		if r.status != 400 {
			t.Errorf("%s: %d %s, want 400", k.name, r.status, r.body)
			continue
		}
		e := rawError(t, r)
		if e["param"] != k.param || e["code"] == nil || e["code"] == "" {
			t.Errorf("%s: param %v code %v, want param %q and a code (%s)", k.name, e["param"], e["code"], k.param, e["message"])
		}
	}
	// An unknown model is a 404 naming model.
	for _, k := range []c{{"speech", "/v1/audio/speech", `{"model":"nope","input":"hi"}`, jsonHdr, "model"}} {
		e := rawError(t, ts.must(404, "POST", k.path, k.body, k.hdr...))
		if e["code"] == nil {
			t.Errorf("%s: unknown model: %v", k.name, e)
		}
	}
}
