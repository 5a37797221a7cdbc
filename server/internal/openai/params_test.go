package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

func TestSpeechParams(t *testing.T) {
	req, err := SpeechParams{Model: "tts", Input: "hello", Voice: "alloy", ResponseFormat: "pcm", SampleRate: 24000, StreamFormat: "audio"}.Request()
	if err != nil || !req.Stream {
		t.Fatalf("%+v %v", req, err)
	}
	r, err := audio.ParseTTS(req.Input)
	if err != nil || r.Text != "hello" || r.Format != "pcm" || r.SampleRate != 24000 || r.Speed != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, p := range []SpeechParams{{Input: "x", ResponseFormat: "aiff"}, {Input: "x", ResponseFormat: "aac", StreamFormat: "audio"}, {Input: "x", ResponseFormat: "mp3", StreamFormat: "audio"}, {Input: "x", ResponseFormat: "flac", StreamFormat: "sse"}, {Input: ""}, {Input: "x", Speed: 9}, {Input: "x", StreamFormat: "ws"}} {
		if _, err := p.Request(); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

func TestTranscriptionBody(t *testing.T) {
	out := backends.Output{JSON: json.RawMessage(`{"text":"turn on the lights","duration":1.5}`)}
	ct, b, err := TranscriptionBody(out, TranscriptionParams{})
	if err != nil || ct != "application/json" || string(b) != `{"text":"turn on the lights"}` {
		t.Fatalf("json: %s %s %v", ct, b, err)
	}
	if ct, b, _ := TranscriptionBody(out, TranscriptionParams{ResponseFormat: "text"}); !strings.HasPrefix(ct, "text/plain") || string(b) != "turn on the lights\n" {
		t.Fatalf("text: %s %q", ct, b)
	}
	if _, b, _ := TranscriptionBody(out, TranscriptionParams{ResponseFormat: "verbose_json"}); !strings.Contains(string(b), `"duration":1.5`) {
		t.Fatalf("verbose: %s", b)
	}
}

// asr is an engine result of two sentences with word times.
var asr = backends.Output{JSON: json.RawMessage(`{"text":"turn on the lights please","duration":3725.5,"language":"en",
	"segments":[{"id":0,"start":0.17,"end":1.63,"text":"turn on the lights"},{"id":1,"start":3661.25,"end":3662.001,"text":"please"}],
	"words":[{"word":"turn","start":0.17,"end":0.48},{"word":"on","start":0.48,"end":0.65},{"word":"the","start":0.65,"end":0.74},
	{"word":"lights","start":0.74,"end":1.63},{"word":"please","start":3661.25,"end":3662.001}]}`)}

// srt and vtt were 400; now they are cues from the segments with each
// format's timestamps.
func TestSubtitles(t *testing.T) {
	_, b, err := TranscriptionBody(asr, TranscriptionParams{ResponseFormat: "srt"})
	want := "1\n00:00:00,170 --> 00:00:01,630\nturn on the lights\n\n2\n01:01:01,250 --> 01:01:02,001\nplease\n\n"
	if err != nil || string(b) != want {
		t.Fatalf("srt: %v\n%q\nwant\n%q", err, b, want)
	}
	ct, b, err := TranscriptionBody(asr, TranscriptionParams{ResponseFormat: "vtt"})
	want = "WEBVTT\n\n00:00:00.170 --> 00:00:01.630\nturn on the lights\n\n01:01:01.250 --> 01:01:02.001\nplease\n\n"
	if err != nil || string(b) != want || !strings.HasPrefix(ct, "text/") {
		t.Fatalf("vtt: %v %s\n%q\nwant\n%q", err, ct, b, want)
	}
	if _, b, _ := TranscriptionBody(backends.Output{JSON: json.RawMessage(`{"text":"","duration":1}`)}, TranscriptionParams{ResponseFormat: "vtt"}); string(b) != "WEBVTT\n\n" {
		t.Fatalf("empty vtt: %q", b)
	}
}

// verbose_json had one segment spanning the audio, no words and the
// language "english" whatever the model; now it carries the engine's.
func TestVerboseJSON(t *testing.T) {
	var v struct {
		Task, Language, Text string
		Duration             float64
		Segments             []audio.ASRSegment
		Words                []audio.Word
	}
	for _, words := range []bool{false, true} {
		_, b, err := TranscriptionBody(asr, TranscriptionParams{ResponseFormat: "verbose_json", Words: words})
		if err != nil {
			t.Fatal(err)
		}
		v.Words = nil
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if v.Task != "transcribe" || v.Language != "english" || len(v.Segments) != 2 || v.Segments[1].Text != "please" ||
			v.Segments[1].Start != 3661.25 || (len(v.Words) == 5) != words || strings.Contains(string(b), `"words"`) != words {
			t.Fatalf("words %v: %s", words, b)
		}
	}
}

// Every field takes effect or is a 400 naming it; they used to be
// dropped.
func TestParseTranscription(t *testing.T) {
	p, err := ParseTranscription(map[string][]string{"model": {"m"}, "response_format": {"verbose_json"}, "language": {"en"},
		"timestamp_granularities[]": {"word", "segment"}, "temperature": {"0"}, "prompt": {""}, "stream": {"false"}})
	if err != nil || p.Model != "m" || !p.Words || p.Language != "en" || p.Stream {
		t.Fatalf("%+v %v", p, err)
	}
	if p, err := ParseTranscription(map[string][]string{"stream": {"true"}}); err != nil || !p.Stream {
		t.Fatalf("%+v %v", p, err)
	}
	for field, fs := range map[string]map[string][]string{
		"foo":                       {"foo": {"1"}},
		"include[]":                 {"include[]": {"logprobs"}},
		"prompt":                    {"prompt": {strings.Repeat("kitchen words ", 400)}},
		"temperature":               {"temperature": {"1.7"}},
		"stream":                    {"stream": {"yes please"}},
		"timestamp_granularities[]": {"timestamp_granularities[]": {"word"}},
		"response_format":           {"response_format": {"mp3"}},
		"model":                     {"model": {"a", "b"}},
	} {
		if _, err := ParseTranscription(fs); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%v: %v, want invalid naming %s", fs, err, field)
		}
	}
	if _, err := ParseTranscription(map[string][]string{"stream": {"true"}, "response_format": {"srt"}}); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("stream srt: %v", err)
	}
	// prompt and temperature go to the engine, which refuses what it
	// cannot honour (audio.AudioRequest.CheckPlain).
	p, err = ParseTranscription(map[string][]string{"prompt": {"kitchen words"}, "temperature": {"0.7"}})
	if err != nil || p.Prompt != "kitchen words" || p.Temperature != 0.7 {
		t.Fatalf("%+v %v", p, err)
	}
	in, err := p.Input(json.RawMessage(`{"sample_rate":8000}`))
	var r audio.AudioRequest
	if err != nil || audio.DecodeStrict(in, &r) != nil || r.Prompt != "kitchen words" || r.Temperature != 0.7 || r.SampleRate != 8000 {
		t.Fatalf("input %s %v", in, err)
	}
	// vad_filter (whisper's VAD filter) is a boolean that reaches the
	// engine; an engine without one refuses true.
	p, err = ParseTranscription(map[string][]string{"vad_filter": {"true"}})
	if err != nil || p.VADFilter == nil || !*p.VADFilter {
		t.Fatalf("vad_filter true: %+v %v", p, err)
	}
	if in, err = p.Input(nil); err != nil || audio.DecodeStrict(in, &r) != nil || r.VADFilter == nil || !*r.VADFilter {
		t.Fatalf("vad_filter input %s %v", in, err)
	}
	if p, err = ParseTranscription(map[string][]string{"vad_filter": {""}}); err != nil || p.VADFilter != nil {
		t.Fatalf("vad_filter empty: %+v %v", p, err)
	}
	if _, err := ParseTranscription(map[string][]string{"vad_filter": {"maybe"}}); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "vad_filter") {
		t.Errorf("vad_filter maybe: %v", err)
	}
}

// Translations take OpenAI's fields (no language, granularities or
// stream) and ask for the translate task.
func TestParseTranslation(t *testing.T) {
	p, err := ParseTranslation(map[string][]string{"model": {"m"}, "response_format": {"srt"}, "prompt": {"p"}, "temperature": {"0"}})
	if err != nil || p.Task != audio.TaskTranslate || p.Model != "m" || p.Prompt != "p" {
		t.Fatalf("%+v %v", p, err)
	}
	for field, fs := range map[string]map[string][]string{
		"language":        {"language": {"de"}},
		"stream":          {"stream": {"true"}},
		"response_format": {"response_format": {"mp3"}},
		"temperature":     {"temperature": {"-1"}},
	} {
		if _, err := ParseTranslation(fs); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%v: %v, want invalid naming %s", fs, err, field)
		}
	}
}

// A whisper stream: deltas as they come, then done alone.
func TestTranscriptEventsDeltas(t *testing.T) {
	evs, err := TranscriptEvents(json.RawMessage(`{"delta":" two","start":1,"end":2}`))
	if err != nil || len(evs) != 1 || string(evs[0]) != `{"delta":" two","type":"transcript.text.delta"}` {
		t.Fatalf("%s %v", evs, err)
	}
	evs, err = TranscriptEvents(json.RawMessage(`{"text":"one two","duration":2,"streamed":true,"segments":[{"id":0,"start":0,"end":2,"text":"one two"}]}`))
	if err != nil || len(evs) != 1 || string(evs[0]) != `{"text":"one two","type":"transcript.text.done"}` {
		t.Fatalf("%s %v", evs, err)
	}
}

// The stream's events are one delta per segment, then done with the text.
func TestTranscriptEvents(t *testing.T) {
	evs, err := TranscriptEvents(asr.JSON)
	if err != nil || len(evs) != 3 {
		t.Fatalf("%q %v", evs, err)
	}
	want := []string{`{"delta":"turn on the lights","type":"transcript.text.delta"}`, `{"delta":" please","type":"transcript.text.delta"}`,
		`{"text":"turn on the lights please","type":"transcript.text.done"}`}
	for i, e := range evs {
		if string(e) != want[i] {
			t.Errorf("event %d %s, want %s", i, e, want[i])
		}
	}
}

func TestParseVoiceActivity(t *testing.T) {
	model, in, err := ParseVoiceActivity(map[string][]string{"model": {"v"}, "threshold": {"0.6"}, "speech_pad_ms": {"30"}},
		json.RawMessage(`{"sample_rate":8000}`))
	if err != nil || model != "v" || string(in) != `{"sample_rate":8000,"threshold":0.6,"speech_pad_ms":30}` {
		t.Fatalf("%q %s %v", model, in, err)
	}
	if _, in, err := ParseVoiceActivity(map[string][]string{"model": {"v"}, "min_speech_ms": {""}}, nil); err != nil || in != nil {
		t.Fatalf("empty field: %s %v", in, err)
	}
	for name, fields := range map[string]map[string][]string{
		"prompt":          {"prompt": {"x"}},
		"response_format": {"response_format": {"verbose_json"}},
		"threshold":       {"threshold": {"0"}},
		"min_silence_ms":  {"min_silence_ms": {"0"}},
		"min_speech_ms":   {"min_speech_ms": {"1", "2"}},
	} {
		if _, _, err := ParseVoiceActivity(fields, nil); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := (SpeechParams{Model: "m", Input: "x", Instructions: "sing"}).Request(); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "instructions") {
		t.Errorf("instructions: %v", err)
	}
}
