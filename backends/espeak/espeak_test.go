package espeak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// sharedRoot holds the one good checkpoint of the test binary: eSpeak NG
// keeps the first data path for the whole process.
var sharedRoot string

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedRoot != "" {
		os.RemoveAll(sharedRoot)
	}
	os.Exit(code)
}

// checkpoint builds the default checkpoint: the shared good one when edit
// is nil, else an edited copy in a test folder.
func checkpoint(t testing.TB, edit func(*catalogue.Recipe)) string {
	t.Helper()
	native.SkipUnavailable(t, Available())
	r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.EspeakEn)
	native.SkipUnavailable(t, err)
	root := t.TempDir()
	if edit != nil {
		edit(&r)
	} else {
		if sharedRoot == "" {
			if sharedRoot, err = os.MkdirTemp("", "espeak-test-"); err != nil {
				t.Fatal(err)
			}
		}
		root = sharedRoot
	}
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, catalogue.EspeakEn)
}

func spec(dir string, slots int) backends.Spec {
	return backends.Spec{Model: "es", Task: "tts", Engine: Name, Checkpoint: dir, Options: json.RawMessage(`{}`), Slots: slots}
}

func say(t *testing.T, s backends.Session, text, voice string) []byte {
	t.Helper()
	in, _ := json.Marshal(audio.TTSRequest{Text: text, Voice: voice})
	out, err := s.Infer(context.Background(), backends.Request{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out.Data
}

func TestSpeaksDeterministically(t *testing.T) {
	dir := checkpoint(t, nil)
	s, n, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if n != 1 {
		t.Fatalf("capacity %d, want 1", n)
	}
	a := say(t, s, "Turn off the bedroom fan. Thank you!", "")
	w, err := audio.ParseWAV(a)
	if err != nil || w.Rate != 22050 || w.Seconds() < 1 {
		t.Fatalf("wav: rate %d, %.2f s, %v", w.Rate, w.Seconds(), err)
	}
	other := say(t, s, "Something else entirely.", "en-gb-x-rp")
	if b := say(t, s, "Turn off the bedroom fan. Thank you!", ""); !bytes.Equal(a, b) {
		t.Fatal("the same request gave different audio")
	}
	if bytes.Equal(a, other) {
		t.Fatal("different requests gave the same audio")
	}
}

// TestRefusesTwoSlotsWhileServing: slots=2 is refused with ErrInvalid by
// Validate, Probe reports capacity 1 and Clone fails, while the existing
// session keeps serving identical answers.
func TestRefusesTwoSlotsWhileServing(t *testing.T) {
	dir := checkpoint(t, nil)
	e := New()
	s, _, err := e.Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	before := say(t, s, "Lock the front door.", "")
	if err := e.Validate(spec(dir, 2)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "parallel") {
		t.Fatalf("Validate slots=2: %v", err)
	}
	if n, err := e.Probe(context.Background(), spec(dir, 2)); err != nil || n != 1 {
		t.Fatalf("Probe: capacity %d, %v", n, err)
	}
	if _, err := s.Clone(context.Background(), 1); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("Clone: %v", err)
	}
	if after := say(t, s, "Lock the front door.", ""); !bytes.Equal(before, after) {
		t.Fatal("the session changed its answer after the refusal")
	}
	if err := e.Validate(spec(dir, 1)); err != nil {
		t.Fatalf("slots=1 still valid: %v", err)
	}
}

func TestBadDataIsAnErrorNotExit(t *testing.T) {
	e := New()
	missing := checkpoint(t, func(r *catalogue.Recipe) {
		var keep []catalogue.Source
		for _, f := range r.Files {
			if !strings.HasSuffix(f.Dest, "/phondata") {
				keep = append(keep, f)
			}
		}
		r.Files = keep
	})
	nodict := checkpoint(t, func(r *catalogue.Recipe) {
		var keep []catalogue.Source
		for _, f := range r.Files {
			if !strings.HasSuffix(f.Dest, "en_dict") {
				keep = append(keep, f)
			}
		}
		r.Files = keep
	})
	good := checkpoint(t, func(*catalogue.Recipe) {})
	cases := map[string]backends.Spec{
		"missing phondata": spec(missing, 1),
		"missing dict":     spec(nodict, 1),
		"no data folder":   {Task: "tts", Checkpoint: good, Slots: 1, Options: json.RawMessage(`{"data":"nowhere"}`)},
		"escaping data":    {Task: "tts", Checkpoint: good, Slots: 1, Options: json.RawMessage(`{"data":"../.."}`)},
		"unknown voice":    {Task: "tts", Checkpoint: good, Slots: 1, Options: json.RawMessage(`{"voice":"klingon"}`)},
		"bad wpm":          {Task: "tts", Checkpoint: good, Slots: 1, Options: json.RawMessage(`{"wpm":5}`)},
	}
	for name, sp := range cases {
		if err := e.Validate(sp); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: Validate: %v", name, err)
		}
		if _, _, err := e.Open(context.Background(), sp); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: Open: %v", name, err)
		}
	}
	// Another data folder than the process's first is refused.
	first, _, err := e.Open(context.Background(), spec(checkpoint(t, nil), 1))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(context.Background())
	if err := e.Validate(spec(good, 1)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "restarts") {
		t.Fatalf("second data folder: %v", err)
	}
	// A damaged phondata (same size, different bytes) fails on its hash.
	p := filepath.Join(good, "espeak-ng-data", "phondata")
	b, _ := os.ReadFile(p)
	copy(b, "XXXXXXXX")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Open(context.Background(), spec(good, 1)); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("damaged phondata: %v", err)
	}
}

func TestRequests(t *testing.T) {
	dir := checkpoint(t, nil)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, in := range []string{`{"text":"hi","voice":"klingon"}`, `{"text":" "}`, `{"text":"hi","speed":9}`} {
		if _, err := s.Infer(context.Background(), backends.Request{Input: json.RawMessage(in)}, nil); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: %v", in, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Infer(ctx, backends.Request{Input: json.RawMessage(`{"text":"never"}`)}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	var chunks int
	_, err = s.Infer(context.Background(), backends.Request{Input: json.RawMessage(`{"text":"One. Two."}`), Stream: true}, func(json.RawMessage) error {
		chunks++
		return nil
	})
	if err != nil || chunks != 2 {
		t.Fatalf("stream: %d chunks, %v", chunks, err)
	}
}

// TestGarbageDataIsAnErrorInAFreshProcess: phoneme data that passes the
// file checks (its manifest rebuilt around garbage) still ends in an error
// from espeak_ng_Initialize, not in the exit(1) of espeak_Initialize. It
// runs in a child process because it initialises the process-global
// library with the bad folder.
func TestGarbageDataIsAnErrorInAFreshProcess(t *testing.T) {
	if os.Getenv("SLUICE_ESPEAK_CHILD") == "1" {
		dir := checkpoint(t, func(r *catalogue.Recipe) {
			for i := range r.Files {
				if strings.HasSuffix(r.Files[i].Dest, "/phondata") {
					r.Files[i].Src, r.Files[i].Content = "", bytes.Repeat([]byte("garbage!"), 4096)
				}
			}
		})
		_, _, err := New().Open(context.Background(), spec(dir, 1))
		if err == nil {
			t.Fatal("garbage phondata opened")
		}
		os.Stdout.WriteString("CHILD-OK " + err.Error() + "\n")
		return
	}
	native.SkipUnavailable(t, Available())
	cmd := exec.Command(os.Args[0], "-test.run=^TestGarbageDataIsAnErrorInAFreshProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_ESPEAK_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CHILD-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// Every speech output format from the real engine (22.05 kHz, a rate
// neither Opus nor OpenAI's pcm use) decodes back to the WAV's duration;
// pcm without sample_rate is 24 kHz.
func TestOutputFormats(t *testing.T) {
	dir := checkpoint(t, nil)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	wav, err := audio.ParseWAV(say(t, s, "Open the garage door.", ""))
	if err != nil {
		t.Fatal(err)
	}
	for format, ct := range map[string]string{
		"mp3":  "audio/mpeg",
		"opus": "audio/ogg; codecs=opus",
		"flac": "audio/flac",
		"pcm":  audio.PCMContentType(24000),
	} {
		in, _ := json.Marshal(audio.TTSRequest{Text: "Open the garage door.", Format: format})
		out, err := s.Infer(context.Background(), backends.Request{Input: in}, nil)
		if err != nil || out.ContentType != ct {
			t.Fatalf("%s: %q, %v; want %q", format, out.ContentType, err, ct)
		}
		raw := 0
		if format == "pcm" {
			raw = 24000
		}
		a, err := audio.Decode(out.Data, raw)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if d := a.Seconds() - wav.Seconds(); d < -0.05 || d > 0.1 {
			t.Fatalf("%s: %.3f s, the WAV is %.3f s", format, a.Seconds(), wav.Seconds())
		}
	}
}

// Speech's speed takes effect (words per minute scale with it: speed 2 is
// shorter than 1, 0.5 longer), and an unknown voice is refused naming it
// and the checkpoint's voices (no parameter silently ignored).
func TestSpeedAndVoiceTakeEffect(t *testing.T) {
	dir := checkpoint(t, nil)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	length := func(in string) int {
		t.Helper()
		out, err := s.Infer(context.Background(), backends.Request{Input: json.RawMessage(in)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		return len(out.Data)
	}
	const text = `"text":"The quick brown fox jumps over the lazy dog."`
	normal, fast, slow := length(`{`+text+`}`), length(`{`+text+`,"speed":2}`), length(`{`+text+`,"speed":0.5}`)
	if !(fast < normal*3/4 && slow > normal*5/4) {
		t.Fatalf("speed 0.5, 1, 2: %d, %d, %d bytes", slow, normal, fast)
	}
	_, err = s.Infer(context.Background(), backends.Request{Input: json.RawMessage(`{"text":"hi","voice":"klingon"}`)}, nil)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), `"klingon"`) || !strings.Contains(err.Error(), "have ") {
		t.Fatalf("unknown voice: %v", err)
	}
}
