package sherpa

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// TestBpeVocabParse: every line the library's encoder would exit on, and
// a byte-fallback table it would read past, is refused; a real layout
// parses.
func TestBpeVocabParse(t *testing.T) {
	good := "<blk>\t0\n<unk>\t0\n\u2581THE\t-2.5\nS\t-3.1\n\u2581\t-4\nT\t-5e0\n.5x\t.5\n"
	v, err := parseBpeVocab([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.score) != 7 || v.fallback || v.score["T"] != -5 {
		t.Errorf("parsed %v", v)
	}
	bytesTable := func(skip int) string {
		var b strings.Builder
		for k := range 256 {
			if k != skip {
				b.WriteString(bytePiece(byte(k)) + " 0\n")
			}
		}
		return b.String()
	}
	if v, err := parseBpeVocab([]byte("<unk> 0\n" + bytesTable(-1) + "\u2581A -1\n")); err != nil || !v.fallback {
		t.Errorf("byte-fallback vocabulary: %v %v", v, err)
	}
	for name, in := range map[string]string{
		"empty":             "",
		"empty line":        "a 1\n\nb 2\n",
		"blank line":        "a 1\n   \n",
		"one field":         "a\n",
		"three fields":      "a 1 2\n",
		"hex score":         "a 0x1p3\n",
		"inf":               "a inf\n",
		"nan":               "a nan\n",
		"overflow":          "a 1e400\n",
		"word score":        "a one\n",
		"duplicate":         "a 1\na 2\n",
		"long piece":        strings.Repeat("x", maxBpePiece+1) + " 1\n",
		"short byte table":  "<unk> 0\n<0x00> 0\n<0x01> 0\n",
		"byte table order":  "<unk> 0\n" + strings.Replace(bytesTable(-1), "<0x41>", "<0x42>", 1),
		"byte table hole":   "<unk> 0\n" + bytesTable(7) + "x 0\n",
		"underscore number": "a 1_0\n",
	} {
		if _, err := parseBpeVocab([]byte(in)); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}

// TestBpeEncode: words split into the pieces whose scores add up highest,
// ties to the shorter piece, uncovered bytes to <unk> or byte pieces.
func TestBpeEncode(t *testing.T) {
	v, err := parseBpeVocab([]byte("<unk> 0\n\u2581 -3\n\u2581THE -2\nT -3\nH -3\nE -3\nHE -1\n\u2581T -1\nAB -2\nA -1\nB -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Worked by hand: "THE" is ▁T HE (-2) or ▁THE (-2), a tie the
	// shorter first piece wins; "AB" is ▁ A B or ▁ AB (-5), A wins; "THEX"
	// ends in a byte no piece starts; "É" is two such bytes.
	for _, c := range []struct {
		word string
		want []string
	}{
		{"THE", []string{"\u2581T", "HE"}},
		{"HE", []string{"\u2581", "HE"}},
		{"AB", []string{"\u2581", "A", "B"}},
		{"THEX", []string{"\u2581T", "HE", "<unk>"}},
		{"\u00c9", []string{"\u2581", "<unk>", "<unk>"}},
		{"", []string{"\u2581"}},
		{"TT", []string{"\u2581T", "T"}},
		{"ETHE", []string{"\u2581", "E", "T", "HE"}},
		{"ABA", []string{"\u2581", "A", "B", "A"}},
		{"THEE", []string{"\u2581T", "HE", "E"}},
		{"HEAB", []string{"\u2581", "HE", "A", "B"}},
		{"THEHE", []string{"\u2581T", "HE", "HE"}},
		{"TAB", []string{"\u2581T", "A", "B"}},
	} {
		if got := v.encode(c.word); !slices.Equal(got, c.want) {
			t.Errorf("encode(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	// A whole-word piece that scores higher wins outright.
	w, err := parseBpeVocab([]byte("<unk> 0\n\u2581 -3\n\u2581AB -1\nA -1\nB -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.encode("AB"); !slices.Equal(got, []string{"\u2581AB"}) {
		t.Errorf("encode(AB) = %q, want [▁AB]", got)
	}
	fb := "<unk> 0\n"
	for k := range 256 {
		fb += bytePiece(byte(k)) + " -9\n"
	}
	v, err = parseBpeVocab([]byte(fb + "\u2581 -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v.encode("é"), []string{"\u2581", "<0xC3>", "<0xA9>"}; !slices.Equal(got, want) {
		t.Errorf("byte fallback: %q, want %q", got, want)
	}
}

// TestHotwordsBPE: a BPE transducer (offline and streaming) spells a hotword with its word
// pieces (bpe.vocab), so "the" (▁the) and "quiz" (▁ q u i z) are taken,
// while the cjkchar transducer, whose pieces are whole ASCII runs,
// refuses "the"; a word the pieces cannot spell is refused naming
// hotwords; hotwords change the transcript and the same request answers
// the same bytes.
func TestHotwordsBPE(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	text := jfkText(t)
	for _, name := range []string{TransducerBPESynthetic, StreamingBPESynthetic} {
		beam := open(t, e, root, name, `{"decoding_method":"modified_beam_search"}`)
		plain, err := text(beam, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		// Whole-word pieces the model already emits now and then (▁one,
		// ▁and), boosted, come out more often.
		const hw = `{"hotwords":"one :40/and :40"}`
		hot, err := text(beam, hw)
		if err != nil {
			t.Fatal(err)
		}
		again, err := text(beam, hw)
		if err != nil {
			t.Fatal(err)
		}
		words := func(s string) int { return strings.Count(s, "one") + strings.Count(s, "and") }
		if hot == plain || again != hot || words(hot) <= words(plain) {
			t.Errorf("%s: hotwords: %q, again %q; without: %q", name, hot, again, plain)
		}
		if _, err := text(beam, `{"hotwords":"the quiz/you"}`); err != nil {
			t.Errorf("%s: hotwords by pieces: %v", name, err)
		}
		if _, err := text(beam, `{"hotwords":"`+strings.Repeat("a", maxHotwordBytes+1)+`"}`); backends.ParamOf(err) != "hotwords" {
			t.Errorf("%s: hotwords over %d bytes: %v", name, maxHotwordBytes, err)
		}
		for _, bad := range []string{"caf\u00e9", "naïve", "x-ray"} {
			_, err := text(beam, `{"hotwords":"`+bad+`"}`)
			if backends.ParamOf(err) != "hotwords" || !strings.Contains(err.Error(), "modeling unit bpe") {
				t.Errorf("%s: hotword %q: %v", name, bad, err)
			}
		}
	}
	cjk := open(t, e, root, TransducerSynthetic, `{"decoding_method":"modified_beam_search"}`)
	if _, err := text(cjk, `{"hotwords":"the"}`); backends.ParamOf(err) != "hotwords" {
		t.Errorf("cjkchar transducer took the BPE word \"the\": %v", err)
	}
	// cjkchar+bpe: ASCII runs by pieces, other characters as themselves.
	mixed := open(t, e, root, TransducerBPESynthetic, `{"decoding_method":"modified_beam_search","modeling_unit":"cjkchar+bpe"}`)
	if _, err := text(mixed, `{"hotwords":"the quiz"}`); err != nil {
		t.Errorf("cjkchar+bpe: %v", err)
	}
	if _, err := text(mixed, `{"hotwords":"the-end"}`); backends.ParamOf(err) != "hotwords" {
		t.Errorf("cjkchar+bpe took a hyphen no token spells: %v", err)
	}
}

// jfkText returns a transcription function over jfk.wav: a session's text
// for a request input, or its error.
func jfkText(t *testing.T) func(s backends.Session, in string) (string, error) {
	t.Helper()
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	return func(s backends.Session, in string) (string, error) {
		out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: []byte(in)}, nil)
		if err != nil {
			return "", err
		}
		var r audio.ASRResult
		if err := json.Unmarshal(out.JSON, &r); err != nil {
			t.Fatal(err)
		}
		return r.Text, nil
	}
}
