package pocketsphinx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// checkpoint builds the default en-us checkpoint under a temporary root.
func checkpoint(t *testing.T) string {
	t.Helper()
	native.SkipUnavailable(t, Available())
	r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.PocketsphinxEnUS)
	native.SkipUnavailable(t, err)
	root := t.TempDir()
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, catalogue.PocketsphinxEnUS)
}

func spec(dir string, slots int) backends.Spec {
	return backends.Spec{Model: "asr", Task: "asr", Engine: Name, Checkpoint: dir, Options: json.RawMessage(`{}`), Slots: slots}
}

// speak synthesises text with flite (the test's audio source) as a WAV.
func speak(t *testing.T, text string) []byte {
	t.Helper()
	native.SkipUnavailable(t, flite.Available())
	s, _, err := flite.New().Open(context.Background(), backends.Spec{Task: "tts", Checkpoint: "slt", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	in, _ := json.Marshal(audio.TTSRequest{Text: text})
	out, err := s.Infer(context.Background(), backends.Request{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out.Data
}

func transcribe(t *testing.T, s backends.Session, wav []byte) audio.ASRResult {
	t.Helper()
	out, err := s.Infer(context.Background(), backends.Request{Data: wav}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r audio.ASRResult
	if err := json.Unmarshal(out.JSON, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTranscribesFliteSpeech(t *testing.T) {
	dir := checkpoint(t)
	s, n, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if n != 16 {
		t.Fatalf("capacity %d, want 16", n)
	}
	r := transcribe(t, s, speak(t, "Turn on the kitchen lights."))
	for _, w := range []string{"turn", "kitchen", "lights"} {
		if !strings.Contains(r.Text, w) {
			t.Errorf("transcript %q lacks %q", r.Text, w)
		}
	}
	if r.Duration < 0.5 {
		t.Errorf("duration %.2f", r.Duration)
	}
}

// TestResultIndependentOfHistory: a session's answer depends on the request
// alone (batch CMN per utterance), so any slot gives the same bytes.
func TestParallelSessionsMatchSerial(t *testing.T) {
	dir := checkpoint(t)
	inputs := [][]byte{speak(t, "Open the garage door."), speak(t, "What time is it?"), speak(t, "Call my sister.")}
	primary, _, err := New().Open(context.Background(), spec(dir, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close(context.Background())
	second, err := primary.Clone(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(context.Background())
	want := make([]string, len(inputs))
	for i, in := range inputs {
		out, err := primary.Infer(context.Background(), backends.Request{Data: in}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = string(out.JSON)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for k, s := range []backends.Session{primary, second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range inputs {
				j := (i + k) % len(inputs)
				out, err := s.Infer(context.Background(), backends.Request{Data: inputs[j]}, nil)
				if err == nil && string(out.JSON) != want[j] {
					err = fmt.Errorf("session %d input %d: %s, want %s", k, j, out.JSON, want[j])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRawPCMAndResampling(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	wav := speak(t, "Play some jazz music.")
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	want := transcribe(t, s, wav).Text
	in, _ := json.Marshal(audio.AudioRequest{SampleRate: 16000})
	out, err := s.Infer(context.Background(), backends.Request{Input: in, Data: audio.PCM16Bytes(a.Samples)}, nil)
	if err != nil || !strings.Contains(string(out.JSON), want) {
		t.Fatalf("raw PCM: %s %v, want %q", out.JSON, err, want)
	}
	up := audio.WAV(44100, audio.Resample(a.Samples, 16000, 44100))
	if got := transcribe(t, s, up).Text; !strings.Contains(got, "music") {
		t.Fatalf("44.1 kHz input: %q", got)
	}
	// audio.raw-declared: the same PCM without a declared rate is refused,
	// not decoded at the engine's rate.
	if _, err := s.Infer(context.Background(), backends.Request{Data: audio.PCM16Bytes(a.Samples)}, nil); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("undeclared raw PCM: got %v, want ErrInvalid", err)
	}
	for _, bad := range [][]byte{nil, []byte("garbage!!"), []byte("RIFF\x10\x00\x00\x00WAVEfmt "), []byte("ID3\x04\x00\x00\x00\x00\x00\x00\xff\xfb\x90\x64")} {
		if _, err := s.Infer(context.Background(), backends.Request{Data: bad}, nil); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("audio %q: got %v, want ErrInvalid", bad, err)
		}
	}
}

// TestCorruptModelIsAnError: a damaged file (hash mismatch) and a file whose
// manifest was rebuilt around garbage (bad header) both fail Validate and
// Open with ErrInvalid, before the library reads them; the process lives.
func TestCorruptModelIsAnError(t *testing.T) {
	dir := checkpoint(t)
	e := New()
	lm := filepath.Join(dir, "en-us.lm.bin")
	b, err := os.ReadFile(lm)
	if err != nil {
		t.Fatal(err)
	}
	copy(b[1000:], "corrupted bytes here")
	if err := os.WriteFile(lm, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(spec(dir, 1)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("damaged lm: %v", err)
	}
	if _, _, err := e.Open(context.Background(), spec(dir, 1)); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("open damaged lm: %v", err)
	}
	// Rebuild the manifest around a garbage mdef: hashes match, format does not.
	garbage := filepath.Join(t.TempDir(), "mdef")
	if err := os.WriteFile(garbage, []byte("not a model definition"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.PocketsphinxEnUS)
	for i := range r.Files {
		if r.Files[i].Dest == "en-us/mdef" {
			r.Files[i].Src = garbage
		}
	}
	root := filepath.Dir(dir)
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(spec(dir, 1)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "mdef") {
		t.Fatalf("garbage mdef: %v", err)
	}
}

func TestValidateSlotsAndTask(t *testing.T) {
	dir := checkpoint(t)
	e := New()
	if err := e.Validate(spec(dir, 16)); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]backends.Spec{
		"17 slots":    spec(dir, 17),
		"wrong task":  {Task: "tts", Checkpoint: dir, Slots: 1},
		"no folder":   spec(filepath.Join(dir, "nope"), 1),
		"bad option":  {Task: "asr", Checkpoint: dir, Slots: 1, Options: json.RawMessage(`{"beam":1}`)},
		"escape":      {Task: "asr", Checkpoint: dir, Slots: 1, Options: json.RawMessage(`{"lm":"../x"}`)},
		"missing lm":  {Task: "asr", Checkpoint: dir, Slots: 1, Options: json.RawMessage(`{"lm":"none.bin"}`)},
		"max_seconds": {Task: "asr", Checkpoint: dir, Slots: 1, Options: json.RawMessage(`{"max_seconds":0.5}`)},
	} {
		if err := e.Validate(s); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

// countingBlob is a request Body that counts the bytes read from it.
type countingBlob struct {
	*bytes.Reader
	read atomic.Int64
}

func (c *countingBlob) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.Reader.ReadAt(p, off)
	c.read.Add(int64(n))
	return n, err
}

// TestMaxSecondsBeforeDecoding (audio.duration-limit): audio longer than
// max_seconds is refused from its WAV header, reading only the header of
// the upload; a cancelled request stops before decoding.
func TestMaxSecondsBeforeDecoding(t *testing.T) {
	dir := checkpoint(t)
	sp := spec(dir, 1)
	sp.Options = json.RawMessage(`{"max_seconds":2}`)
	s, _, err := New().Open(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	long := &countingBlob{Reader: bytes.NewReader(audio.WAV(1009, make([]int16, 3*1009)))}
	_, err = s.Infer(context.Background(), backends.Request{Body: long}, nil)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "limit of 2 s") {
		t.Fatalf("3 s with max_seconds 2: got %v, want ErrInvalid naming the limit", err)
	}
	if n := long.read.Load(); n > 64 {
		t.Fatalf("read %d bytes before refusing, want the header only", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Infer(ctx, backends.Request{Data: speak(t, "Play some jazz music.")}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v, want context.Canceled", err)
	}
}

// The decoder's word segmentation comes back as words whose times
// increase and fall inside the audio, grouped into segments at the pause
// between two sentences.
func TestWordTimes(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	r := transcribe(t, s, speak(t, "Turn on the kitchen lights. Please open the door."))
	if len(r.Words) < 4 {
		t.Fatalf("words %+v, want the sentence's words", r.Words)
	}
	var joined []string
	prev := 0.0
	for _, w := range r.Words {
		if w.Start < prev || w.End <= w.Start || w.End > r.Duration {
			t.Fatalf("word %+v out of order or outside 0..%v (previous end %v)", w, r.Duration, prev)
		}
		prev = w.End
		joined = append(joined, w.Word)
	}
	if got := strings.Join(joined, " "); got != r.Text {
		t.Fatalf("words %q, text %q", got, r.Text)
	}
	if r.Language != "en" || len(r.Segments) != 2 || !strings.HasPrefix(r.Segments[1].Text, "please") || r.Segments[0].Start != r.Words[0].Start ||
		r.Segments[len(r.Segments)-1].End != r.Words[len(r.Words)-1].End {
		t.Fatalf("language %q segments %+v", r.Language, r.Segments)
	}
	for _, lang := range []string{"", "en", "EN", "en-US", "english"} {
		in, _ := json.Marshal(audio.AudioRequest{Language: lang})
		if _, err := s.Infer(context.Background(), backends.Request{Input: in, Data: speak(t, "Yes.")}, nil); err != nil {
			t.Fatalf("language %q: %v", lang, err)
		}
	}
	bad := spec(dir, 1)
	bad.Options = json.RawMessage(`{"language":"english"}`)
	if err := New().Validate(bad); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("language option english: %v, want invalid (ISO-639-1 only)", err)
	}
	in, _ := json.Marshal(audio.AudioRequest{Language: "fr"})
	_, err = s.Infer(context.Background(), backends.Request{Input: in, Data: speak(t, "Yes.")}, nil)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "language") {
		t.Fatalf("language fr: %v, want invalid naming language", err)
	}
}
