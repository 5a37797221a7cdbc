package audio

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

// An engine that cannot translate, be prompted, sample or filter with a
// VAD refuses each, naming it; a plain request passes.
func TestCheckPlain(t *testing.T) {
	on := true
	for field, r := range map[string]AudioRequest{"prompt": {Prompt: "x"}, "temperature": {Temperature: 0.5}, "task": {Task: TaskTranslate}, "vad_filter": {VADFilter: &on}} {
		if err := r.CheckPlain("e"); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("CheckPlain %+v: %v", r, err)
		}
	}
	if err := (AudioRequest{Language: "en", Task: TaskTranscribe}).CheckPlain("e"); err != nil {
		t.Errorf("plain: %v", err)
	}
}

// A TTS request's engine request is checked as ParseTTS checks it.
func TestTTSRequest(t *testing.T) {
	req, err := TTSRequest{Text: "hello", Format: "pcm"}.Request(true)
	if err != nil || !req.Stream {
		t.Fatalf("%+v %v", req, err)
	}
	r, err := ParseTTS(req.Input)
	if err != nil || r.Text != "hello" || r.SampleRate != PCMRate || r.Speed != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []TTSRequest{{Text: ""}, {Text: "x", Format: "aiff"}, {Text: "x", Speed: 9}, {Text: "x", SampleRate: 100}} {
		if _, err := bad.Request(false); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestCheckLanguage(t *testing.T) {
	for _, l := range []string{"", "en", "EN", "en-US", "en_gb", "English"} {
		if c, err := CheckLanguage(l, []string{"en"}); err != nil || c != "en" {
			t.Errorf("%q: %q %v", l, c, err)
		}
	}
	for _, l := range []string{"fr", "french", "eng", strings.Repeat("x", 5000)} {
		if _, err := CheckLanguage(l, []string{"en"}); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "language") || len(err.Error()) > 300 {
			t.Errorf("%.10q: %v", l, err)
		}
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

// Words split into segments at pauses and at subtitle-sized lengths.
func TestSegments(t *testing.T) {
	var ws []Word
	for i := range 60 { // 60 words back to back, 0.3 s each, then a pause
		ws = append(ws, Word{Word: "w", Start: float64(i) * 0.3, End: float64(i)*0.3 + 0.3})
	}
	ws = append(ws, Word{Word: "x", Start: 30, End: 30.5})
	segs := Segments(ws)
	if len(segs) != 4 || segs[3].Text != "x" || segs[3].Start != 30 || segs[0].Start != 0 || segs[2].End != ws[59].End {
		t.Fatalf("%+v", segs)
	}
	for i, s := range segs {
		if s.ID != i || s.End-s.Start > SegmentMaxSeconds || len(strings.Fields(s.Text)) > SegmentMaxWords {
			t.Fatalf("segment %+v", s)
		}
	}
	if Segments(nil) != nil {
		t.Fatal("no words, no segments")
	}
}
