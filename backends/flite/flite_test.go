package flite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

func spec(voice string, slots int) backends.Spec {
	return backends.Spec{Model: "t", Task: "tts", Engine: Name, Checkpoint: voice, Options: json.RawMessage(`{}`), Slots: slots}
}

func tts(text string) backends.Request {
	b, _ := json.Marshal(audio.TTSRequest{Text: text})
	return backends.Request{ID: "r", Input: b}
}

func open(t *testing.T, s backends.Spec) backends.Session {
	t.Helper()
	native.SkipUnavailable(t, Available())
	sess, _, err := New().Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close(context.Background()) })
	return sess
}

func TestSynthesizeWAV(t *testing.T) {
	s := open(t, spec("slt", 1))
	out, err := s.Infer(context.Background(), tts("Turn on the kitchen lights."), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(out.Data)
	if err != nil || out.ContentType != "audio/wav" {
		t.Fatalf("not a WAV (%s): %v", out.ContentType, err)
	}
	if a.Rate != 16000 || a.Seconds() < 0.5 || a.Seconds() > 5 {
		t.Fatalf("rate %d, %.2f s", a.Rate, a.Seconds())
	}
}

func TestFormatsAndRates(t *testing.T) {
	s := open(t, spec("slt", 1))
	in, _ := json.Marshal(audio.TTSRequest{Text: "One two three.", Format: "pcm", SampleRate: 24000})
	out, err := s.Infer(context.Background(), backends.Request{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.ContentType != audio.PCMContentType(24000) || len(out.Data)%2 != 0 || len(out.Data) < 24000 {
		t.Fatalf("pcm output: %s, %d bytes", out.ContentType, len(out.Data))
	}
}

// TestParallelSessionsMatchSerial is the matched-output check for flite:
// four sessions synthesising concurrently give the same bytes as one
// session alone, for every voice of ParallelVoices.
func TestParallelSessionsMatchSerial(t *testing.T) {
	native.SkipUnavailable(t, Available())
	texts := []string{"Open the front door.", "What is the weather like today?"}
	for _, voice := range ParallelVoices() {
		t.Run(voice, func(t *testing.T) {
			primary := open(t, spec(voice, 4))
			want := make([][]byte, len(texts))
			for i, tx := range texts {
				out, err := primary.Infer(context.Background(), tts(tx), nil)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = out.Data
			}
			sessions := []backends.Session{primary}
			for i := 1; i < 4; i++ {
				c, err := primary.Clone(context.Background(), i)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close(context.Background()) })
				sessions = append(sessions, c)
			}
			var wg sync.WaitGroup
			errs := make(chan error, len(sessions))
			for k, s := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 1 {
						for i := range texts {
							j := (i + k + round) % len(texts)
							out, err := s.Infer(context.Background(), tts(texts[j]), nil)
							if err != nil {
								errs <- err
								return
							}
							if !bytes.Equal(out.Data, want[j]) {
								errs <- fmt.Errorf("session %d text %d: output differs from the serial run", k, j)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func TestStreamMatchesWhole(t *testing.T) {
	s := open(t, spec("slt", 1))
	text := "First sentence here. And a second one! Finally, a question?"
	// Resampled from the voice's 16 kHz to 48 kHz: one resampler runs
	// across the sentences (audio.ChunkEmitter), so the chunks are the
	// whole file's samples, edges included.
	in, _ := json.Marshal(audio.TTSRequest{Text: text, Format: "pcm", SampleRate: 48000})
	whole, err := s.Infer(context.Background(), backends.Request{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	chunks := 0
	out, err := s.Infer(context.Background(), backends.Request{Input: in, Stream: true}, func(c json.RawMessage) error {
		pcm, rate, err := audio.DecodeChunk(c)
		if err != nil || rate != 48000 {
			return fmt.Errorf("chunk: rate %d: %v", rate, err)
		}
		got = append(got, pcm...)
		chunks++
		return nil
	})
	if err != nil || len(out.Data) != 0 {
		t.Fatalf("stream: %v, final output %d bytes", err, len(out.Data))
	}
	if chunks < 3 || !bytes.Equal(got, whole.Data) {
		t.Fatalf("%d chunks, %d bytes; want a chunk or more per sentence, equal to the whole %d bytes", chunks, len(got), len(whole.Data))
	}
	stop := errors.New("client gone")
	if _, err := s.Infer(context.Background(), backends.Request{Input: in, Stream: true}, func(json.RawMessage) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("emit error not returned: %v", err)
	}
}

func TestCancelledContext(t *testing.T) {
	s := open(t, spec("slt", 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Infer(ctx, tts("Never spoken."), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestVoiceChurn(t *testing.T) {
	native.SkipUnavailable(t, Available())
	e := New()
	for i := range 30 {
		s, _, err := e.Open(context.Background(), spec([]string{"slt", "awb", "kal"}[i%3], 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Infer(context.Background(), tts("Hi."), nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestValidate(t *testing.T) {
	native.SkipUnavailable(t, Available())
	e := New()
	if err := e.Validate(spec("slt", 16)); err != nil {
		t.Fatalf("slt at 16 slots: %v", err)
	}
	bad := map[string]backends.Spec{
		"unknown voice": spec("nobody", 1),
		"17 slots":      spec("slt", 17),
		"0 slots":       spec("slt", 0),
		"wrong task":    {Task: "asr", Checkpoint: "slt", Slots: 1},
		"bad option":    {Task: "tts", Checkpoint: "slt", Slots: 1, Options: json.RawMessage(`{"pitch":3}`)},
		"bad stretch":   {Task: "tts", Checkpoint: "slt", Slots: 1, Options: json.RawMessage(`{"duration_stretch":9}`)},
	}
	for name, s := range bad {
		if err := e.Validate(s); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	s := open(t, spec("slt", 1))
	for _, in := range []string{`{"text":""}`, `{"text":"\ud83d\ude00 \u4f60\u597d"}`, `{"text":"hi","voice":"zira"}`, `{"text":"hi","extra":1}`, `not json`} {
		if _, err := s.Infer(context.Background(), backends.Request{Input: json.RawMessage(in)}, nil); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("input %s: got %v, want ErrInvalid", in, err)
		}
	}
}

func TestCheckpointFolder(t *testing.T) {
	native.SkipUnavailable(t, Available())
	r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.FliteSLT)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	sp := spec(root+"/"+catalogue.FliteSLT, 2)
	e := New()
	if err := e.Validate(sp); err != nil {
		t.Fatal(err)
	}
	n, err := e.Probe(context.Background(), sp)
	if err != nil || n != 16 {
		t.Fatalf("probe: capacity %d, %v", n, err)
	}
}

func TestSanitize(t *testing.T) {
	got := Sanitize("It\u2019s \u201cfine\u201d\u2026 caf\u00e9\n\tok \U0001F600")
	if want := `It's "fine"... caf ok`; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}
