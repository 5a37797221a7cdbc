package whisper

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

var (
	enOnce sync.Once
	enDir  string
	enErr  error
)

// english builds an English-only tiny checkpoint (tiny.en's vocabulary).
func english(t *testing.T) string {
	t.Helper()
	root := typed(t, "")
	enOnce.Do(func() {
		d := synth.Tiny
		d.Vocab = synth.VocabEn
		r, err := Recipe("t-en", d, Seed, 4)
		if err != nil {
			enErr = err
			return
		}
		_, enErr = catalogue.Build(filepath.Dir(root), []catalogue.Recipe{r})
		enDir = filepath.Join(filepath.Dir(root), "t-en")
	})
	if enErr != nil {
		t.Fatal(enErr)
	}
	return enDir
}

func mustInfer(t *testing.T, s backends.Session, wav []byte, input string) (audio.ASRResult, string) {
	t.Helper()
	return infer(t, s, wav, input)
}

func inferErr(s backends.Session, wav []byte, input string) error {
	_, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: json.RawMessage(input)}, nil)
	return err
}

// TestStreamsSegmentsAsDecoded: with Stream,
// each segment goes out as a TranscriptDelta from whisper's new-segment
// callback: the first arrives while whisper_full is still running (the
// decoding hook, not a clock), the deltas concatenate to the final text,
// and the final chunk says they were streamed.
func TestStreamsSegmentsAsDecoded(t *testing.T) {
	s := open(t, spec(tiny(t), 1, ""))
	var deltas []string
	var final audio.ASRResult
	firstDuringDecode := false
	emit := func(chunk json.RawMessage) error {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(chunk, &probe); err != nil {
			return err
		}
		if _, ok := probe["delta"]; ok {
			var d audio.TranscriptDelta
			if err := json.Unmarshal(chunk, &d); err != nil {
				return err
			}
			if len(deltas) == 0 {
				firstDuringDecode = decoding.Load() > 0
			}
			deltas = append(deltas, d.Delta)
			return nil
		}
		return json.Unmarshal(chunk, &final)
	}
	long := pcm(t, 60) // two 30 s windows: at least two segments
	out, err := s.Infer(context.Background(), backends.Request{Data: long, Input: json.RawMessage(`{"sample_rate":16000}`), Stream: true}, emit)
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) < 2 || !firstDuringDecode {
		t.Fatalf("%d deltas, first during the decode: %v", len(deltas), firstDuringDecode)
	}
	if got := strings.Join(deltas, ""); got != final.Text || !final.Streamed {
		t.Fatalf("deltas %q\nfinal %q (streamed %v)", got, final.Text, final.Streamed)
	}
	// The same request unstreamed answers the same text.
	r, _ := mustInfer(t, s, long, `{"sample_rate":16000}`)
	if r.Text != final.Text {
		t.Fatalf("unstreamed %q, streamed %q", r.Text, final.Text)
	}
	var back audio.ASRResult
	if err := json.Unmarshal(out.JSON, &back); err != nil || back.Text != final.Text {
		t.Fatalf("output %s: %v", out.JSON, err)
	}
	// A client gone mid-stream stops the decode: the emit error ends Infer.
	gone := errors.New("client gone")
	_, err = s.Infer(context.Background(), backends.Request{Data: long, Input: json.RawMessage(`{"sample_rate":16000}`), Stream: true},
		func(json.RawMessage) error { return gone })
	if !errors.Is(err, gone) {
		t.Fatalf("emit failing: %v, want the emit error", err)
	}
}

// TestTranslateTask: a multilingual model runs the
// translate task (the answer says so); an English-only model refuses it,
// naming why.
func TestTranslateTask(t *testing.T) {
	s := open(t, spec(typed(t, ""), 1, ""))
	r, raw := mustInfer(t, s, pcm(t, 3), `{"sample_rate":16000,"task":"translate"}`)
	if r.Task != audio.TaskTranslate || r.Text == "" {
		t.Fatalf("translate: %s", raw)
	}
	en := open(t, spec(english(t), 1, ""))
	err := inferErr(en, pcm(t, 3), `{"sample_rate":16000,"task":"translate"}`)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "English-only") || !strings.Contains(err.Error(), "translate") {
		t.Fatalf("English-only translate: %v", err)
	}
	if r, raw := mustInfer(t, en, pcm(t, 3), `{"sample_rate":16000}`); r.Language != "en" || r.Text == "" {
		t.Fatalf("English-only transcribe: %s", raw)
	}
	if err := inferErr(s, pcm(t, 3), `{"sample_rate":16000,"task":"summarise"}`); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("unknown task: %v", err)
	}
}

// TestPromptConditionsTheDecode: a prompt changes the
// answer, the same prompt gives the same bytes on every slot and after
// other requests, and a prompt over the model's bound is invalid naming
// prompt.
func TestPromptConditionsTheDecode(t *testing.T) {
	dir := typed(t, "")
	a := open(t, spec(dir, 2, ""))
	b, err := a.Clone(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	in := pcm(t, 3)
	_, plain := mustInfer(t, a, in, `{"sample_rate":16000}`)
	prompted := `{"sample_rate":16000,"prompt":"Sluice serves speech models."}`
	_, p1 := mustInfer(t, a, in, prompted)
	mustInfer(t, b, pcm(t, 2), `{"sample_rate":16000,"language":"de"}`)
	_, p2 := mustInfer(t, b, in, prompted)
	if p1 == plain {
		t.Errorf("the prompt changed nothing: %s", p1)
	}
	if p1 != p2 {
		t.Errorf("prompted answers differ across slots:\n%s\n%s", p1, p2)
	}
	long := `{"sample_rate":16000,"prompt":"` + strings.Repeat("many words here ", 40) + `"}`
	err = inferErr(a, in, long)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "prompt") {
		t.Fatalf("long prompt: %v", err)
	}
}

// TestTemperatureReproducible: above 0 whisper
// samples with its fallback, every decoder's generator reseeded per
// request (shim/build.sh), so two identical requests on different slots
// and histories give identical bytes.
func TestTemperatureReproducible(t *testing.T) {
	dir := typed(t, "")
	a := open(t, spec(dir, 1, ""))
	b := open(t, spec(dir, 1, ""))
	in := pcm(t, 3)
	hot := `{"sample_rate":16000,"temperature":0.7}`
	_, r1 := mustInfer(t, a, in, hot)
	mustInfer(t, b, pcm(t, 2), hot)
	mustInfer(t, b, pcm(t, 4), `{"sample_rate":16000}`)
	_, r2 := mustInfer(t, b, in, hot)
	if r1 != r2 {
		t.Fatalf("temperature 0.7 twice:\n%s\n%s", r1, r2)
	}
	if err := inferErr(a, in, `{"sample_rate":16000,"temperature":1.5}`); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "temperature") {
		t.Fatalf("temperature 1.5: %v", err)
	}
}

// TestDetectedLanguage: without a language a
// multilingual model detects one and reports its probability; a named
// language is not detected (no probability).
func TestDetectedLanguage(t *testing.T) {
	s := open(t, spec(typed(t, ""), 1, ""))
	r, raw := mustInfer(t, s, pcm(t, 3), `{"sample_rate":16000}`)
	if r.Language == "" || !(r.LanguageProbability > 0 && r.LanguageProbability <= 1) {
		t.Fatalf("detected: %s", raw)
	}
	if r, raw := mustInfer(t, s, pcm(t, 3), `{"sample_rate":16000,"language":"fr"}`); r.Language != "fr" || r.LanguageProbability != 0 {
		t.Fatalf("named: %s", raw)
	}
}

// TestDTWWordTimes: option dtw takes word times from
// DTW token timestamps (top-N heads on a synthetic model); a published
// preset on other dimensions is refused naming the mismatch.
func TestDTWWordTimes(t *testing.T) {
	dir := typed(t, "")
	s := open(t, spec(dir, 1, `{"oversubscribe":true,"dtw":"top-2"}`))
	r, raw := mustInfer(t, s, pcm(t, 4), `{"sample_rate":16000}`)
	if len(r.Words) < 2 {
		t.Fatalf("dtw words: %s", raw)
	}
	prev := 0.0
	for _, w := range r.Words {
		if w.Start < prev || w.End < w.Start || w.End > r.Duration {
			t.Fatalf("word %+v out of order: %s", w, raw)
		}
		prev = w.End
	}
	for _, bad := range []string{`{"dtw":"large-v3"}`, `{"dtw":"top-9"}`, `{"dtw":"nope"}`} {
		if err := New().Validate(spec(dir, 1, bad)); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "dtw") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
