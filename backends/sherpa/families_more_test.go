package sherpa

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

// TestKittenSpeaks: the Kitten voice lists its speakers from the model's
// speaker_names, answers at 24 kHz, each speaker sounds different, and
// speed shortens the audio.
func TestKittenSpeaks(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	voices, err := e.Voices(specOf(t, root, KittenSynthetic, 1, ""))
	if err != nil || len(voices) != 3 || voices[0].ID != "expr-voice-2-m" || voices[2].ID != "expr-voice-3-m" || voices[0].SampleRate != 24000 {
		t.Fatalf("voices %+v, %v", voices, err)
	}
	s := open(t, e, root, KittenSynthetic, "")
	a := speak(t, s, `{"text":"Hello there. How are you?","voice":"expr-voice-2-m"}`)
	b := speak(t, s, `{"text":"Hello there. How are you?","voice":"expr-voice-2-f"}`)
	fast := speak(t, s, `{"text":"Hello there. How are you?","voice":"expr-voice-2-m","speed":2}`)
	if len(a) == 0 || len(a) != len(b) || slices.Equal(a, b) {
		t.Errorf("two speakers: %d and %d samples, equal %v", len(a), len(b), slices.Equal(a, b))
	}
	if len(fast) > len(a)*11/20 || len(fast) < len(a)*9/20 {
		t.Errorf("speed 2: %d samples, speed 1: %d", len(fast), len(a))
	}
}

// TestMatchaVocosSpeaks: the Matcha voice with a Vocos vocoder (the
// library's inverse STFT after the model) answers at 22.05 kHz with
// hop_length samples per mel frame, and speed shortens the audio.
func TestMatchaVocosSpeaks(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, MatchaVocosSynthetic, "")
	a := speak(t, s, `{"text":"Hello there. How are you?"}`)
	fast := speak(t, s, `{"text":"Hello there. How are you?","speed":2}`)
	if len(a) == 0 || len(fast) > len(a)*11/20 || len(fast) < len(a)*9/20 {
		t.Errorf("speed 2: %d samples, speed 1: %d", len(fast), len(a))
	}
}

// TestKokoroMultiLang: a multi-language Kokoro (metadata version 2 with
// lexicons) lists each voice with the language its name names where the
// espeak-ng data has it (ef_synth Spanish; zf_synth's Mandarin data is
// not in the checkpoint, so it speaks the default), phonemizes a text in
// the voice's language (the same text is a different number of phonemes,
// so samples, in Spanish than in English: the style does not change the
// length), and reads Chinese from its lexicon.
func TestKokoroMultiLang(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	voices, err := e.Voices(specOf(t, root, KokoroMultiSynthetic, 1, ""))
	if err != nil || len(voices) != 3 {
		t.Fatalf("voices %+v, %v", voices, err)
	}
	var langs []string
	for _, v := range voices {
		langs = append(langs, v.Languages...)
	}
	if !slices.Equal(langs, []string{"en-us", "es", "en-us"}) {
		t.Errorf("languages %q, want en-us, es, en-us", langs)
	}
	s := open(t, e, root, KokoroMultiSynthetic, "")
	const text = `{"text":"Queremos una ciudad tranquila y hermosa.","voice":"%s"}`
	en := speak(t, s, fmt.Sprintf(text, "af_synth"))
	es := speak(t, s, fmt.Sprintf(text, "ef_synth"))
	if len(en) == 0 || len(es) == 0 || len(en) == len(es) {
		t.Errorf("the same text: %d samples in English, %d in Spanish; want two phonemizations", len(en), len(es))
	}
	zh := speak(t, s, `{"text":"你好世界","voice":"zf_synth"}`)
	if len(zh) == 0 {
		t.Errorf("Chinese from the lexicon: no audio")
	}
}

// TestParaformerWords: FunASR's "@@" pieces join the next token, other
// tokens end their word, and a word ends where the next begins.
func TestParaformerWords(t *testing.T) {
	got := paraformerWords([]string{"he@@", "llo", "wor@@", "ld", "你", "好"}, []float32{0, 0.1, 0.5, 0.6, 1.0, 1.2}, 2)
	want := []string{"hello 0.000-0.500", "world 0.500-1.000", "你 1.000-1.200", "好 1.200-2.000"}
	var have []string
	for _, w := range got {
		have = append(have, fmt.Sprintf("%s %.3f-%.3f", w.Word, w.Start, w.End))
	}
	if !slices.Equal(have, want) {
		t.Errorf("words %q, want %q", have, want)
	}
	if paraformerWords([]string{"a"}, nil, 1) != nil {
		t.Errorf("tokens without times gave words")
	}
}

// TestHotwords: a transducer registered with modified_beam_search takes
// a request's hotwords (the transcript leans toward them) and answers the
// same bytes for the same request; greedy search, a family without
// biasing and a phrase the tokens cannot spell are refused, naming the
// field. A language a recognizer cannot take names language.
func TestHotwords(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	text := jfkText(t)
	for _, name := range []string{TransducerSynthetic, StreamingSynthetic, ParakeetSynthetic} {
		beam := open(t, e, root, name, `{"decoding_method":"modified_beam_search"}`)
		plain, err := text(beam, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		hot, err := text(beam, `{"hotwords":"q x z/j :40/l :40"}`)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := text(beam, `{"hotwords":"q x z/j :40/l :40"}`)
		if hot == plain || again != hot || strings.Count(hot, "l")+strings.Count(hot, "j") <= strings.Count(plain, "l")+strings.Count(plain, "j") {
			t.Errorf("%s: hotwords q x z: %q; without: %q", name, hot, plain)
		}
		if _, err := text(beam, `{"hotwords":"qq"}`); backends.ParamOf(err) != "hotwords" {
			t.Errorf("%s: a phrase the tokens cannot spell: %v", name, err)
		}
	}
	for _, name := range []string{TransducerSynthetic, NemoCTCSynthetic} {
		s := open(t, e, root, name, "")
		if _, err := text(s, `{"hotwords":"q"}`); backends.ParamOf(err) != "hotwords" || !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: hotwords without beam search: %v", name, err)
		}
	}
	s := open(t, e, root, SenseVoiceSynthetic, "")
	if _, err := text(s, `{"language":"fr"}`); backends.ParamOf(err) != "language" {
		t.Errorf("SenseVoice asked for a language it does not declare: %v", err)
	}
	s = open(t, e, root, NemoCTCSynthetic, "")
	if _, err := text(s, `{"language":"fr"}`); backends.ParamOf(err) != "language" {
		t.Errorf("an English model asked for French: %v", err)
	}
	spec := specOf(t, root, NemoCTCSynthetic, 1, `{"decoding_method":"modified_beam_search"}`)
	if err := e.Validate(spec); err == nil || !strings.Contains(err.Error(), "transducer") {
		t.Errorf("beam search on CTC: %v", err)
	}
}

// TestEspeakDataOfTheProcess: espeak-ng reads the data of the first voice
// the process loaded; a multi-language voice whose language that data
// lacks is refused naming voice, not sent to espeak-ng.
func TestEspeakDataOfTheProcess(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, KokoroMultiSynthetic, "")
	clear := func() { espeakData.has.Range(func(k, _ any) bool { espeakData.has.Delete(k); return true }) }
	setDir := func(d string) (old string) {
		espeakData.mu.Lock()
		defer espeakData.mu.Unlock()
		old, espeakData.dir = espeakData.dir, d
		return old
	}
	saved := setDir(t.TempDir()) // data without any voice
	t.Cleanup(func() { setDir(saved); clear() })
	clear()
	_, err := s.Infer(context.Background(), backends.Request{Input: []byte(`{"text":"Hola.","voice":"ef_synth"}`)}, nil)
	if backends.ParamOf(err) != "voice" {
		t.Errorf("a language the process's espeak-ng data lacks: %v", err)
	}
}
