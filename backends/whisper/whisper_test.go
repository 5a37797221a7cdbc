package whisper

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

func TestTranscribesWithTheTinyModel(t *testing.T) {
	s := open(t, spec(tiny(t), 1, ""))
	r, raw := infer(t, s, jfk(t), "")
	if r.Duration < 10.9 || r.Duration > 11.1 {
		t.Errorf("duration %.3f, want 11", r.Duration)
	}
	if r.Text == "" || len(r.Words) < 2 || len(r.Segments) == 0 || r.Language == "" {
		t.Fatalf("empty parts in %s", raw)
	}
	prev := 0.0
	for _, w := range r.Words {
		if w.Start < prev || w.End < w.Start || w.End > r.Duration || strings.ContainsAny(w.Word, " \uFFFD") {
			t.Fatalf("word %+v out of order, outside the audio or not one word: %s", w, raw)
		}
		prev = w.End
	}
	for _, sg := range r.Segments {
		if sg.End < sg.Start || sg.End > r.Duration || sg.Text == "" {
			t.Fatalf("segment %+v: %s", sg, raw)
		}
	}
	// A language the request names is decoded as that language; one
	// whisper does not know is a 400.
	if r2, _ := infer(t, s, jfk(t), `{"language":"de"}`); r2.Language != "de" {
		t.Errorf("language de gave %q", r2.Language)
	}
	_, err := s.Infer(context.Background(), backends.Request{Data: jfk(t), Input: json.RawMessage(`{"language":"xx"}`)}, nil)
	if !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("language xx: %v, want invalid", err)
	}
}

// pcm returns seconds of jfk.wav's speech, repeated, as raw PCM16LE.
func pcm(t *testing.T, seconds float64) []byte {
	t.Helper()
	w := jfk(t)[44:]
	n := int(seconds*SampleRate) * 2
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, w[:min(len(w), n-len(out))]...)
	}
	return out
}

func inputs(t *testing.T) [][]byte {
	w := jfk(t)
	return [][]byte{w, pcm(t, 2.5), pcm(t, 4), w[:44+2*SampleRate*6]}
}

func rawInput(b []byte) string {
	if len(b) >= 4 && string(b[:4]) == "RIFF" {
		return ""
	}
	return `{"sample_rate":16000}`
}

// TestParallelStatesMatchSerial (whisper.matched-outputs): two states over
// one context, decoding at the same time, give the bytes one state gives
// alone.
func TestParallelStatesMatchSerial(t *testing.T) {
	primary := open(t, spec(tiny(t), 2, ""))
	second, err := primary.Clone(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(context.Background())
	in := inputs(t)
	want := make([]string, len(in))
	for i, b := range in {
		_, want[i] = infer(t, primary, b, rawInput(b))
	}
	var wg sync.WaitGroup
	got := make([][]string, 2)
	for k, s := range []backends.Session{primary, second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range in {
				i := (j + k) % len(in) // different orders: history must not matter
				out, err := s.Infer(context.Background(), backends.Request{Data: in[i], Input: json.RawMessage(rawInput(in[i]))}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				got[k] = append(got[k], string(out.JSON))
			}
		}()
	}
	wg.Wait()
	for k := range got {
		for j, g := range got[k] {
			if i := (j + k) % len(in); g != want[i] {
				t.Errorf("slot %d input %d:\n got %s\nwant %s", k, i, g, want[i])
			}
		}
	}
}

// TestCancelMidDecode (whisper.cancel-mid-decode): a request's context
// ending while whisper decodes stops the decode through the abort
// callback; Infer returns the context's error and the same session (the
// slot) decodes the next request.
func TestCancelMidDecode(t *testing.T) {
	s := open(t, spec(tiny(t), 1, "")).(*session)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	defer NotifyDecodes(s.cfg.file, w)()
	ctx, cancel := context.WithCancel(context.Background())
	long := pcm(t, 90) // three 30 s windows
	done := make(chan error, 1)
	go func() {
		_, err := s.Infer(ctx, backends.Request{Data: long, Input: json.RawMessage(`{"sample_rate":16000}`)}, nil)
		done <- err
	}()
	var b [1]byte
	if _, err := r.Read(b[:]); err != nil { // the shim's first abort poll: the encoder runs
		t.Fatal(err)
	}
	t0 := time.Now()
	cancel()
	err = <-done
	freed := time.Since(t0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled decode returned %v, want context.Canceled", err)
	}
	t.Logf("cancel to free slot, mid-decode: %v", freed)
	if res, _ := infer(t, s, pcm(t, 2), `{"sample_rate":16000}`); res.Duration != 2 {
		t.Fatalf("the session after a cancel: %+v", res)
	}
}

// corrupt builds checkpoints whose manifests match damaged model files.
func corrupt(t *testing.T) map[string]string {
	t.Helper()
	good, err := synth.Bytes(synth.Tiny, Seed)
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"bad-magic": func(b []byte) []byte { b[0] ^= 0xff; return b },
		"huge-hparams": func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[12:], 1<<30) // n_audio_state
			return b
		},
		"huge-token": func(b []byte) []byte {
			off := 4 + 11*4 + 8 + 4*synth.Mels*synth.FFTBins + 4 // the first token's length
			binary.LittleEndian.PutUint32(b[off:], 1<<31-1)
			return b
		},
		"trailing": func(b []byte) []byte { return append(b, 1, 2, 3) },
		"empty":    func([]byte) []byte { return nil },
	}
	root := t.TempDir()
	var recipes []catalogue.Recipe
	for name, f := range damage {
		r, err := Recipe(name, synth.Tiny, Seed, 1)
		if err != nil {
			t.Fatal(err)
		}
		r.Files[0].Content = f(append([]byte(nil), good...))
		recipes = append(recipes, r)
	}
	if _, err := catalogue.Build(root, recipes); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name := range damage {
		out[name] = filepath.Join(root, name)
	}
	return out
}

// TestCorruptModelsRefused (whisper.corrupt-model): a damaged model file is
// a clear invalid error from Validate and Open, before the library reads
// it (whisper.cpp trusts the file's lengths), and the process goes on.
func TestCorruptModelsRefused(t *testing.T) {
	tiny(t)
	for name, dir := range corrupt(t) {
		sp := spec(dir, 1, "")
		err := New().Validate(sp)
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: Validate gave %v, want invalid", name, err)
		}
		if _, _, err := New().Open(context.Background(), sp); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: Open gave %v, want invalid", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestCapacityFollowsCores: a state computes with its own threads, so the
// advertised capacity is the cores over the threads (at least 1) unless
// the spec oversubscribes.
func TestCapacityFollowsCores(t *testing.T) {
	dir := tiny(t)
	c, err := resolve(spec(dir, 1, `{"threads":64}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.capacity != 1 {
		t.Errorf("64 threads per state: capacity %d, want 1", c.capacity)
	}
	if err := New().Validate(spec(dir, 4, `{"threads":64}`)); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("4 slots of 64 threads: %v, want invalid", err)
	}
	if c, err := resolve(spec(dir, 1, `{"threads":64,"oversubscribe":true}`)); err != nil || c.capacity != 4 {
		t.Errorf("oversubscribed: capacity %d (%v), want the manifest's 4", c.capacity, err)
	}
	for _, bad := range []string{`{"threads":0.5}`, `{"threads":65}`, `{"max_seconds":0.5}`, `{"language":"xx"}`, `{"file":"nope.bin"}`, `{"speed":2}`} {
		if err := New().Validate(spec(dir, 1, bad)); err == nil {
			t.Errorf("options %s accepted", bad)
		}
	}
}

// TestRealModelTranscribesJFK runs only where an operator's real ggml
// Whisper model is named by SLUICE_WHISPER_MODEL (none can be obtained
// from the registries this project builds from): jfk.wav's transcript must
// contain its words.
func TestRealModelTranscribesJFK(t *testing.T) {
	path := os.Getenv("SLUICE_WHISPER_MODEL")
	if path == "" {
		t.Log("SLUICE_WHISPER_MODEL unset: no real model to check (see README)")
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	r, err := Recipe("real", synth.Tiny, Seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Files[0].Content = b
	r.Manifest.Description = "an operator's model: " + filepath.Base(path)
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		t.Fatal(err)
	}
	s := open(t, spec(filepath.Join(root, "real"), 1, `{"threads":2}`))
	res, raw := infer(t, s, jfk(t), "")
	for _, w := range []string{"ask not", "country"} {
		if !strings.Contains(strings.ToLower(res.Text), w) {
			t.Errorf("transcript lacks %q: %s", w, raw)
		}
	}
}

// The generator's files pass the validator with the hyperparameters they
// were written with.
func TestCheckModelReadsTheGeneratorsFiles(t *testing.T) {
	for _, d := range []synth.Dims{synth.Tiny, synth.Bench} {
		b, err := synth.Bytes(d, 3)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "m.bin")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		info, err := CheckModel(p)
		if err != nil || info.Hparams != d.Hparams() || !info.Multilingual || info.Bytes != int64(len(b)) {
			t.Fatalf("%s: %+v %v", d.Name, info, err)
		}
	}
}

// TestAnswerIndependentOfHistory: a two-window clip decoded by a fresh
// state and by one that decoded other audio first gives the same bytes.
// whisper.cpp 1.5.0's token timestamps read past a segment's last token
// (stale memory from earlier requests) until build.sh's one-line fix.
func TestAnswerIndependentOfHistory(t *testing.T) {
	dir := tiny(t)
	long := pcm(t, 45)
	_, fresh := infer(t, open(t, spec(dir, 1, "")), long, `{"sample_rate":16000}`)
	s := open(t, spec(dir, 1, ""))
	infer(t, s, jfk(t), "")
	infer(t, s, pcm(t, 3), `{"sample_rate":16000}`)
	if _, after := infer(t, s, long, `{"sample_rate":16000}`); after != fresh {
		t.Fatalf("after other requests:\n%s\nfresh:\n%s", after, fresh)
	}
}
