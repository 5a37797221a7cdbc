package audio

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

func TestSpeechParams(t *testing.T) {
	req, err := SpeechParams{Model: "tts", Input: "hello", Voice: "alloy", ResponseFormat: "pcm", SampleRate: 24000, StreamFormat: "audio"}.Request()
	if err != nil || !req.Stream {
		t.Fatalf("%+v %v", req, err)
	}
	r, err := ParseTTS(req.Input)
	if err != nil || r.Text != "hello" || r.Format != "pcm" || r.SampleRate != 24000 || r.Speed != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, p := range []SpeechParams{{Input: "x", ResponseFormat: "aac"}, {Input: "x", ResponseFormat: "mp3", StreamFormat: "audio"}, {Input: "x", ResponseFormat: "flac", StreamFormat: "sse"}, {Input: ""}, {Input: "x", Speed: 9}, {Input: "x", StreamFormat: "ws"}} {
		if _, err := p.Request(); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

func TestTranscriptionBody(t *testing.T) {
	out := backends.Output{JSON: json.RawMessage(`{"text":"turn on the lights","duration":1.5}`)}
	ct, b, err := TranscriptionBody(out, "")
	if err != nil || ct != "application/json" || string(b) != `{"text":"turn on the lights"}` {
		t.Fatalf("json: %s %s %v", ct, b, err)
	}
	if ct, b, _ := TranscriptionBody(out, "text"); !strings.HasPrefix(ct, "text/plain") || string(b) != "turn on the lights\n" {
		t.Fatalf("text: %s %q", ct, b)
	}
	if _, b, _ := TranscriptionBody(out, "verbose_json"); !strings.Contains(string(b), `"duration":1.5`) {
		t.Fatalf("verbose: %s", b)
	}
	if _, _, err := TranscriptionBody(out, "srt"); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("srt: %v", err)
	}
}

func TestSplitSentences(t *testing.T) {
	got := SplitSentences("Hello there. How are you?\nFine: thanks!  ", 300)
	if strings.Join(got, "|") != "Hello there.|How are you?|Fine:|thanks!" {
		t.Fatalf("%q", got)
	}
	long := strings.Repeat("word ", 100)
	for _, s := range SplitSentences(long, 50) {
		if len(s) > 60 {
			t.Fatalf("piece of %d bytes", len(s))
		}
	}
}
