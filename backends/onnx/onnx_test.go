package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

func checkpoint(t testing.TB) string {
	t.Helper()
	native.SkipUnavailable(t, Available())
	r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.SileroV5)
	native.SkipUnavailable(t, err)
	root := t.TempDir()
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, catalogue.SileroV5)
}

func spec(dir string, slots int, opts string) backends.Spec {
	if opts == "" {
		opts = "{}"
	}
	return backends.Spec{Model: "vad", Task: "vad", Engine: Name, Checkpoint: dir, Options: json.RawMessage(opts), Slots: slots}
}

func open(t *testing.T, dir string) backends.Session {
	t.Helper()
	s, n, err := New(Config{}).Open(context.Background(), spec(dir, 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	if n != 16 {
		t.Fatalf("capacity %d", n)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func detect(t *testing.T, s backends.Session, data []byte) audio.VADResult {
	t.Helper()
	out, err := s.Infer(context.Background(), backends.Request{Data: data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r audio.VADResult
	if err := json.Unmarshal(out.JSON, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func jfk(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	native.SkipUnavailable(t, err)
	return b
}

// TestJFKSegments: the speech of jfk.wav ("And so my fellow Americans, ask
// not what your country can do for you, ask what you can do for your
// country.") is found as a few segments covering most of the clip.
func TestJFKSegments(t *testing.T) {
	s := open(t, checkpoint(t))
	r := detect(t, s, jfk(t))
	t.Logf("jfk.wav: %+v", r)
	if math.Abs(r.Duration-11.0) > 0.1 || len(r.Segments) < 2 || len(r.Segments) > 8 {
		t.Fatalf("duration %.2f, %d segments", r.Duration, len(r.Segments))
	}
	var speech float64
	prev := -1.0
	for _, g := range r.Segments {
		if g.Start < prev || g.End <= g.Start || g.End > r.Duration {
			t.Fatalf("bad segment order %+v", r.Segments)
		}
		prev = g.End
		speech += g.End - g.Start
	}
	if first := r.Segments[0].Start; first > 1.0 || speech < 5 || speech > 10.5 {
		t.Fatalf("first speech at %.2f s, %.2f s of speech", first, speech)
	}
}

// padded builds 16 kHz audio: 1 s silence, a sentence, 1.5 s silence, a
// sentence, 1 s silence; it returns the audio and the sentence spans.
func padded(t *testing.T) ([]byte, [][2]float64) {
	t.Helper()
	native.SkipUnavailable(t, flite.Available())
	fs, _, err := flite.New().Open(context.Background(), backends.Spec{Task: "tts", Checkpoint: "slt", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close(context.Background())
	var all []int16
	var spans [][2]float64
	sil := func(sec float64) { all = append(all, make([]int16, int(sec*16000))...) }
	sil(1)
	for i, text := range []string{"Turn on the lights in the kitchen.", "Then start the dishwasher."} {
		in, _ := json.Marshal(audio.TTSRequest{Text: text})
		out, err := fs.Infer(context.Background(), backends.Request{Input: in}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := audio.ParseWAV(out.Data)
		start := float64(len(all)) / 16000
		all = append(all, a.Samples...)
		spans = append(spans, [2]float64{start, float64(len(all)) / 16000})
		sil([]float64{1.5, 1}[i])
	}
	return audio.WAV(16000, all), spans
}

func TestSilencePaddedSpeech(t *testing.T) {
	s := open(t, checkpoint(t))
	wav, spans := padded(t)
	r := detect(t, s, wav)
	t.Logf("segments %+v, spoken %v", r.Segments, spans)
	if len(r.Segments) != 2 {
		t.Fatalf("%d segments, want 2", len(r.Segments))
	}
	for i, g := range r.Segments {
		if math.Abs(g.Start-spans[i][0]) > 0.35 || math.Abs(g.End-spans[i][1]) > 0.35 {
			t.Errorf("segment %d %+v, spoken %v", i, g, spans[i])
		}
	}
	// The same audio at 44.1 kHz finds the same speech.
	a, _ := audio.ParseWAV(wav)
	r2 := detect(t, s, audio.WAV(44100, audio.Resample(a.Samples, 16000, 44100)))
	if len(r2.Segments) != 2 || math.Abs(r2.Segments[0].Start-r.Segments[0].Start) > 0.1 {
		t.Fatalf("44.1 kHz: %+v", r2.Segments)
	}
}

// TestParallelSessionsMatchSerial: four OrtSessions running concurrently
// give the same bytes as one session alone.
func TestParallelSessionsMatchSerial(t *testing.T) {
	dir := checkpoint(t)
	wav, _ := padded(t)
	inputs := [][]byte{jfk(t), wav}
	primary := open(t, dir)
	want := make([]string, len(inputs))
	for i, in := range inputs {
		out, err := primary.Infer(context.Background(), backends.Request{Data: in}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = string(out.JSON)
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
			for i := range inputs {
				j := (i + k) % len(inputs)
				out, err := s.Infer(context.Background(), backends.Request{Data: inputs[j]}, nil)
				if err == nil && string(out.JSON) != want[j] {
					err = fmt.Errorf("session %d input %d differs: %s", k, j, out.JSON)
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

// TestCancellationTerminatesAndRecovers: a cancelled context ends the
// request (the run options' terminate flag is set, then cleared), and the
// session serves the next request normally; the terminate flag itself
// stops a run.
func TestCancellationTerminatesAndRecovers(t *testing.T) {
	s := open(t, checkpoint(t))
	data := jfk(t)
	want := detect(t, s, data)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Infer(ctx, backends.Request{Data: data}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if got := detect(t, s, data); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after cancel: %+v want %+v", got, want)
	}
	v := s.(*session).vad
	o := v.o
	if err := o.check(o.setTerminate(v.ro), "terminate"); err != nil {
		t.Fatal(err)
	}
	vals := v.values
	err := o.check(o.run(v.sess, v.ro, v.inNames, vals, 3, v.outNames, 2, unsafe.Add(vals, 24)), "run")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "terminat") {
		t.Fatalf("run with terminate set: %v", err)
	}
	if err := o.check(o.unsetTerminate(v.ro), "unset"); err != nil {
		t.Fatal(err)
	}
	if got := detect(t, s, data); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after terminate: %+v", got)
	}
}

func TestCUDAUnavailableIsClearError(t *testing.T) {
	dir := checkpoint(t)
	e := New(Config{})
	err := e.Validate(spec(dir, 1, `{"provider":"cuda"}`))
	if err == nil {
		t.Skip("this machine's ONNX Runtime has a usable CUDA provider")
	}
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "cuda unavailable") {
		t.Fatalf("cuda: %v", err)
	}
	t.Logf("cuda: %v", err)
	if _, _, err := e.Open(context.Background(), spec(dir, 1, `{"provider":"cuda"}`)); err == nil || !strings.Contains(err.Error(), "cuda unavailable") {
		t.Fatalf("open cuda: %v", err)
	}
	if err := e.Validate(spec(dir, 1, `{"provider":"tpu"}`)); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("tpu: %v", err)
	}
}

// TestCorruptModelIsAnError: a damaged file fails its hash, a garbage file
// with a plausible first byte is rejected by ONNX Runtime as an error, a
// file that is not ONNX at all fails the header check; the process lives
// and a good session still works afterwards.
func TestCorruptModelIsAnError(t *testing.T) {
	dir := checkpoint(t)
	e := New(Config{})
	good := open(t, dir)
	garbage := filepath.Join(t.TempDir(), "bad.onnx")
	junk := []byte{0x08}
	for i := range 4096 {
		junk = append(junk, byte(i*7+3))
	}
	if err := os.WriteFile(garbage, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Open(context.Background(), spec(garbage, 1, `{"model":"silero-vad-v5"}`)); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("garbage model: %v", err)
	} else {
		t.Logf("garbage model: %v", err)
	}
	text := filepath.Join(t.TempDir(), "text.onnx")
	os.WriteFile(text, []byte("this is not a model, just some text"), 0o644)
	if err := e.Validate(spec(text, 1, `{"model":"silero-vad-v5"}`)); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("text model: %v", err)
	}
	p := filepath.Join(dir, "silero_vad_v5.onnx")
	b, _ := os.ReadFile(p)
	copy(b[len(b)/2:], "damage")
	os.WriteFile(p, b, 0o644)
	if err := e.Validate(spec(dir, 1, "")); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("damaged model: %v", err)
	}
	if r := detect(t, good, jfk(t)); len(r.Segments) == 0 {
		t.Fatal("the good session stopped working")
	}
}

func TestValidateAndRequests(t *testing.T) {
	dir := checkpoint(t)
	e := New(Config{})
	if err := e.Validate(spec(dir, 16, "")); err != nil {
		t.Fatal(err)
	}
	for name, sp := range map[string]backends.Spec{
		"17 slots":      spec(dir, 17, ""),
		"wrong task":    {Task: "asr", Checkpoint: dir, Slots: 1},
		"bad model":     spec(dir, 1, `{"model":"yolo"}`),
		"threads":       spec(dir, 1, `{"intra_op_threads":-1}`),
		"threshold":     spec(dir, 1, `{"threshold":1.5}`),
		"escape":        spec(dir, 1, `{"file":"../x.onnx"}`),
		"max_seconds":   spec(dir, 1, `{"max_seconds":3601}`),
		"max_seconds<1": spec(dir, 1, `{"max_seconds":-1}`),
	} {
		if err := e.Validate(sp); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	s := open(t, dir)
	for _, req := range []backends.Request{{}, {Data: []byte("noise")}, {Data: jfk(t), Input: json.RawMessage(`{"threshold":2}`)}} {
		if _, err := s.Infer(context.Background(), req, nil); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("request %q: %v", req.Input, err)
		}
	}
	est, err := e.Check(spec(dir, 4, ""))
	if err != nil || est <= 0 {
		t.Fatalf("estimate %d %v", est, err)
	}
}

// TestInputAudioBounds (audio.duration-limit, audio.raw-declared): audio
// longer than max_seconds is refused from its header; raw PCM decodes only
// at a declared sample_rate; other formats are refused.
func TestInputAudioBounds(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New(Config{}).Open(context.Background(), spec(dir, 1, `{"max_seconds":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Infer(context.Background(), backends.Request{Data: audio.WAV(16000, make([]int16, 32000))}, nil); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("2 s with max_seconds 1: got %v, want ErrInvalid", err)
	}
	raw := audio.PCM16Bytes(make([]int16, 8000))
	if _, err := s.Infer(context.Background(), backends.Request{Data: raw}, nil); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("undeclared raw PCM: got %v, want ErrInvalid", err)
	}
	out, err := s.Infer(context.Background(), backends.Request{Data: raw, Input: json.RawMessage(`{"sample_rate":8000}`)}, nil)
	if err != nil || !strings.Contains(string(out.JSON), `"duration":1`) {
		t.Errorf("declared raw PCM: %s %v", out.JSON, err)
	}
	if _, err := s.Infer(context.Background(), backends.Request{Data: []byte("ID3\x04\x00\x00\x00\x00\x00\x00 not audio")}, nil); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("mp3: got %v, want ErrInvalid", err)
	}
}
