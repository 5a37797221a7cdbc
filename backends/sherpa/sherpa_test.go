package sherpa

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/sherpa/synth"
)

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// testRoot builds every synthetic checkpoint once per test binary into a
// temporary models root (removed by TestMain).
func testRoot(t testing.TB) string {
	t.Helper()
	native.SkipUnavailable(t, Available())
	native.SkipUnavailable(t, synth.Available())
	rootOnce.Do(func() {
		rootDir, rootErr = os.MkdirTemp("", "sluice-sherpa-root-")
		if rootErr == nil {
			rootErr = BuildSynthetic(rootDir, catalogue.DefaultSources(""), catalogue.MaxSlots, SyntheticNames...)
		}
	})
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return rootDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if rootDir != "" {
		os.RemoveAll(rootDir)
	}
	os.Exit(code)
}

func specOf(t testing.TB, root, name string, slots int, opts string) backends.Spec {
	t.Helper()
	cp, err := catalogue.Load(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	if opts == "" {
		opts = "{}"
	}
	return backends.Spec{Model: name, Task: cp.Task, Engine: Name, Checkpoint: cp.Dir, Options: json.RawMessage(opts), Slots: slots}
}

// open opens a pool's primary session of name (one slot unless slots).
func open(t *testing.T, e *Engine, root, name, opts string) backends.Session {
	t.Helper()
	spec := specOf(t, root, name, 1, opts)
	if err := e.Validate(spec); err != nil {
		t.Fatal(err)
	}
	s, _, err := e.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func speak(t *testing.T, s backends.Session, in string) []int16 {
	t.Helper()
	out, err := s.Infer(context.Background(), backends.Request{Input: []byte(in)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(out.Data)
	if err != nil {
		t.Fatal(err)
	}
	return a.Samples
}

// TestPiperSpeaks: the voice answers with audio whose length follows the
// text and the speed (length scale), each speaker of the multi-speaker
// model sounds different, sample_rate resamples, and a stream's chunks
// (one per sentence, from the library's callback) are the whole answer.
func TestPiperSpeaks(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	s := open(t, e, root, PiperSynthetic, "")
	one := speak(t, s, `{"text":"Hello world."}`)
	slow := speak(t, s, `{"text":"Hello world.","speed":0.5}`)
	if len(one) == 0 || len(slow) < len(one)*19/10 || len(slow) > len(one)*21/10 {
		t.Errorf("speed 0.5 gave %d samples, speed 1 %d: want about twice", len(slow), len(one))
	}
	resampled := speak(t, s, `{"text":"Hello world.","sample_rate":44100}`)
	if d := len(resampled) - 2*len(one); d < -4 || d > 4 {
		t.Errorf("44.1 kHz gave %d samples, 22.05 kHz %d", len(resampled), len(one))
	}
	if _, err := s.Infer(context.Background(), backends.Request{Input: []byte(`{"text":"Hi.","voice":"nobody"}`)}, nil); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("unknown voice: %v, want invalid", err)
	}
	var chunks []int16
	n := 0
	text := `{"text":"First sentence. Second one here. And a third."}`
	_, err := s.Infer(context.Background(), backends.Request{Input: []byte(text), Stream: true}, func(c json.RawMessage) error {
		b, _, err := audio.DecodeChunk(c)
		if err != nil {
			return err
		}
		p, _ := audio.PCM16(b)
		chunks = append(chunks, p...)
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	whole := speak(t, s, `{"text":"First sentence. Second one here. And a third."}`)
	if n != 3 || !slices.Equal(chunks, whole) {
		t.Errorf("stream: %d chunks, %d samples; whole %d samples (equal %v)", n, len(chunks), len(whole), slices.Equal(chunks, whole))
	}

	m := open(t, e, root, PiperMultiSynthetic, "")
	voices, err := e.Voices(specOf(t, root, PiperMultiSynthetic, 1, ""))
	if err != nil || len(voices) != 3 || voices[1].ID != "bob" || voices[0].SampleRate != 22050 || !voices[0].Default {
		t.Fatalf("voices %+v, %v", voices, err)
	}
	a := speak(t, m, `{"text":"Same words.","voice":"amy"}`)
	b := speak(t, m, `{"text":"Same words.","voice":"bob"}`)
	if len(a) != len(b) || slices.Equal(a, b) {
		t.Errorf("amy and bob: %d and %d samples, equal %v: want the same length, different audio", len(a), len(b), slices.Equal(a, b))
	}
}

// TestCancelStopsGeneration: a context ended during synthesis stops the
// library at the next sentence (the progress callback returns 0).
func TestCancelStopsGeneration(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, PiperSynthetic, "")
	ctx, cancel := context.WithCancel(context.Background())
	pieces := 0
	_, err := s.Infer(ctx, backends.Request{Stream: true, Input: []byte(`{"text":"One. Two. Three. Four. Five. Six.","format":"pcm"}`)}, func(json.RawMessage) error {
		pieces++
		cancel() // the client goes away after the first sentence
		return nil
	})
	if !errors.Is(err, context.Canceled) || pieces != 1 {
		t.Errorf("got %v after %d pieces, want context.Canceled after 1", err, pieces)
	}
	// The session serves the next request whole.
	if got := speak(t, s, `{"text":"Hello world."}`); len(got) == 0 {
		t.Error("no audio after a cancelled request")
	}
}

// TestOfflineTranscribes: each offline recognizer family transcribes
// jfk.wav with words in time order inside the audio (the transducer and
// the CTC model give token times).
func TestOfflineTranscribes(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{NemoCTCSynthetic, TransducerSynthetic, ParakeetSynthetic, SenseVoiceSynthetic, ParaformerSynthetic, WhisperSynthetic, MoonshineSynthetic, MoonshineV2Synthetic, CanarySynthetic} {
		s := open(t, e, root, name, "")
		out, err := s.Infer(context.Background(), backends.Request{Data: wav}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r audio.ASRResult
		if err := json.Unmarshal(out.JSON, &r); err != nil {
			t.Fatal(err)
		}
		if name == WhisperSynthetic || name == MoonshineSynthetic || name == MoonshineV2Synthetic || name == CanarySynthetic { // no token times: Whisper without attention outputs
			if r.Text == "" || r.Duration != 11 {
				t.Fatalf("%s: %s", name, out.JSON)
			}
			t.Logf("%s: %.60q...", name, r.Text)
			continue
		}
		if r.Text == "" || r.Duration != 11 || len(r.Words) < 10 || len(r.Segments) == 0 {
			t.Fatalf("%s: %s", name, out.JSON)
		}
		prev := 0.0
		for _, w := range r.Words {
			if w.Start < prev || w.End < w.Start || w.End > r.Duration {
				t.Fatalf("%s: word %+v out of order or outside the audio", name, w)
			}
			prev = w.Start
		}
		if name == SenseVoiceSynthetic && r.Language != "en" {
			t.Errorf("SenseVoice: language %q, want the detected en (its <|en|> tag)", r.Language)
		}
		t.Logf("%s: %d words, %.60q...", name, len(r.Words), r.Text)
	}
	// A model that detects the language takes a declared one per request
	// (langs.go) and refuses another, naming the field.
	s := open(t, e, root, SenseVoiceSynthetic, "")
	if out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: []byte(`{"language":"en"}`)}, nil); err != nil || !strings.Contains(string(out.JSON), `"language":"en"`) {
		t.Errorf("language en on an auto model: %v %s", err, out.JSON)
	}
	if _, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: []byte(`{"language":"de"}`)}, nil); !errors.Is(err, backends.ErrInvalid) || backends.ParamOf(err) != "language" {
		t.Errorf("language de on SenseVoice: %v", err)
	}
	s = open(t, e, root, SenseVoiceSynthetic, `{"language":"en"}`)
	if _, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: []byte(`{"language":"english"}`)}, nil); err != nil {
		t.Errorf("language english on an en model: %v", err)
	}
}

// TestKokoroSpeaks: the Kokoro voice lists its speakers from the model's
// speaker_names, answers at 24 kHz, each speaker sounds different, and
// speed shortens the audio.
func TestKokoroSpeaks(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	voices, err := e.Voices(specOf(t, root, KokoroSynthetic, 1, ""))
	if err != nil || len(voices) != 2 || voices[0].ID != "af_synth" || voices[1].ID != "am_synth" || voices[0].SampleRate != 24000 {
		t.Fatalf("voices %+v, %v", voices, err)
	}
	s := open(t, e, root, KokoroSynthetic, "")
	a := speak(t, s, `{"text":"Hello there. How are you?","voice":"af_synth"}`)
	b := speak(t, s, `{"text":"Hello there. How are you?","voice":"am_synth"}`)
	fast := speak(t, s, `{"text":"Hello there. How are you?","voice":"af_synth","speed":2}`)
	if len(a) == 0 || len(a) != len(b) || slices.Equal(a, b) {
		t.Errorf("two speakers: %d and %d samples, equal %v", len(a), len(b), slices.Equal(a, b))
	}
	if len(fast) > len(a)*11/20 || len(fast) < len(a)*9/20 {
		t.Errorf("speed 2: %d samples, speed 1: %d", len(fast), len(a))
	}
}

// TestMatchaSpeaks: the Matcha voice (acoustic model and vocoder) answers
// at 22.05 kHz, and speed shortens the audio.
func TestMatchaSpeaks(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, MatchaSynthetic, "")
	a := speak(t, s, `{"text":"Hello there. How are you?"}`)
	fast := speak(t, s, `{"text":"Hello there. How are you?","speed":2}`)
	if len(a) == 0 || len(fast) > len(a)*11/20 || len(fast) < len(a)*9/20 {
		t.Errorf("speed 2: %d samples, speed 1: %d", len(fast), len(a))
	}
}

// TestDiarization: the diarization checkpoint answers jfk.wav with
// segments in order inside the audio, named SPEAKER_00, ... by first
// appearance; num_speakers fixes the count and min_speakers raises a
// thresholded one.
func TestDiarization(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, DiarizationSynthetic, "")
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	run := func(in string) audio.DiarizationResult {
		t.Helper()
		out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: []byte(in)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r audio.DiarizationResult
		if err := json.Unmarshal(out.JSON, &r); err != nil {
			t.Fatal(err)
		}
		prev := 0.0
		for i, sg := range r.Segments {
			if sg.Start < prev || sg.End < sg.Start || sg.End > r.Duration {
				t.Fatalf("%s: segment %+v out of order or outside %.2f s", in, sg, r.Duration)
			}
			if i == 0 && sg.Speaker != "SPEAKER_00" {
				t.Fatalf("%s: first speaker %s", in, sg.Speaker)
			}
			prev = sg.Start
		}
		return r
	}
	count := func(r audio.DiarizationResult) int {
		seen := map[string]bool{}
		for _, sg := range r.Segments {
			seen[sg.Speaker] = true
		}
		return len(seen)
	}
	free := run(`{}`)
	two := run(`{"num_speakers":2}`)
	atLeast := run(`{"min_speakers":3}`)
	if len(free.Segments) == 0 || count(two) != 2 || count(atLeast) < 3 {
		t.Errorf("threshold: %d speakers in %d segments; num_speakers 2: %d; min_speakers 3: %d", count(free), len(free.Segments), count(two), count(atLeast))
	}
	t.Logf("threshold: %d speakers, %d segments", count(free), len(free.Segments))
}

// TestKnownSpeakers: a reference made of one found speaker's own turns
// names that speaker (and only it); the embedding request answers an
// L2-normalised vector of the extractor's size; a reference too short
// for an embedding is refused, naming the field.
func TestKnownSpeakers(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, DiarizationSynthetic, "")
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ParseWAV(wav)
	if err != nil {
		t.Fatal(err)
	}
	diar := func(in any) audio.DiarizationResult {
		t.Helper()
		b, _ := json.Marshal(in)
		out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: b}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r audio.DiarizationResult
		if err := json.Unmarshal(out.JSON, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := diar(map[string]any{"num_speakers": 2})
	var ref []int16
	want := 0
	for _, sg := range first.Segments {
		if sg.Speaker == "SPEAKER_01" {
			ref = append(ref, a.Samples[int(sg.Start*16000):int(sg.End*16000)]...)
			want++
		}
	}
	named := diar(map[string]any{"num_speakers": 2, "known_speakers": []audio.KnownSpeaker{{Name: "alice", Audio: audio.WAV(16000, ref)}}})
	got, other := 0, 0
	for i, sg := range named.Segments {
		switch sg.Speaker {
		case "alice":
			got++
			if first.Segments[i].Speaker != "SPEAKER_01" {
				t.Errorf("segment %d: alice, was %s", i, first.Segments[i].Speaker)
			}
		case "SPEAKER_00":
			other++
		default:
			t.Errorf("segment %d: speaker %q", i, sg.Speaker)
		}
	}
	if want == 0 || got != want || other != len(named.Segments)-want {
		t.Errorf("alice named %d segments of SPEAKER_01's %d (%d others)", got, want, other)
	}
	out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: []byte(`{"embedding":true}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var e EmbeddingResult
	if err := json.Unmarshal(out.JSON, &e); err != nil || e.Dim != 32 || len(e.Embedding) != 32 || math.Abs(float64(dot(e.Embedding, e.Embedding))-1) > 1e-4 {
		t.Errorf("embedding %s: %v", out.JSON, err)
	}
	b, _ := json.Marshal(map[string]any{"known_speakers": []audio.KnownSpeaker{{Name: "bob", Audio: audio.WAV(16000, make([]int16, 10))}}})
	if _, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: b}, nil); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "known_speaker_references[0]") {
		t.Errorf("a 10-sample reference: %v", err)
	}
}
