package sherpa

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// TestRequestLanguage: a model whose recognizer takes a language
// (SenseVoice, Canary) serves a request in any language it declares with
// a recognizer the slot creates for it, keeps at most maxLangs of them
// (least recently used out), answers a request in one language the same
// bytes as a fresh slot does whatever languages came before, and refuses
// a language the model does not declare naming language.
func TestRequestLanguage(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	infer := func(s backends.Session, lang string) (string, audio.ASRResult, error) {
		in, _ := json.Marshal(map[string]string{"language": lang})
		out, err := s.Infer(context.Background(), backends.Request{Data: wav, Input: in}, nil)
		if err != nil {
			return "", audio.ASRResult{}, err
		}
		var r audio.ASRResult
		if err := json.Unmarshal(out.JSON, &r); err != nil {
			t.Fatal(err)
		}
		return string(out.JSON), r, nil
	}
	cases := []struct {
		name    string
		order   []string // requests in turn ("" names none)
		cached  []string // the slot's extra recognizers after order
		unknown []string
	}{
		{SenseVoiceSynthetic, []string{"en", "", "zh", "en", "ja", "auto", "yue", "zh"}, []string{"yue", "zh"}, []string{"fr", "klingon", "xx-YY"}},
		{WhisperMultiSynthetic, []string{"de", "", "es", "de", "fr", "en", "auto", "es"}, []string{"en", "es"}, []string{"zh", "klingon"}},
		{CanarySynthetic, []string{"es", "", "de", "es", "fr", "en", "de"}, []string{"fr", "de"}, []string{"zh", "auto"}},
	}
	for _, tc := range cases {
		fresh, words := map[string]string{}, map[string]string{}
		for _, l := range tc.order {
			if _, ok := fresh[l]; ok {
				continue
			}
			b, r, err := infer(open(t, e, root, tc.name, ""), l)
			if err != nil {
				t.Fatalf("%s %q: %v", tc.name, l, err)
			}
			if l != "" && l != "auto" && r.Language != l {
				t.Errorf("%s: asked %s, the answer says %q", tc.name, l, r.Language)
			}
			fresh[l] = b
			words[l] = r.Text
		}
		var texts []string
		for _, w := range words {
			if !slices.Contains(texts, w) {
				texts = append(texts, w)
			}
		}
		if len(texts) < 3 {
			t.Errorf("%s: %d languages gave %d distinct transcripts: the language does not reach the model %q", tc.name, len(words), len(texts), words)
		}
		s := open(t, e, root, tc.name, "")
		for i, l := range tc.order {
			b, _, err := infer(s, l)
			if err != nil {
				t.Fatalf("%s %q: %v", tc.name, l, err)
			}
			if b != fresh[l] {
				t.Errorf("%s: request %d (%q) after %q differs from a fresh slot's:\n%s\n%s", tc.name, i, l, tc.order[:i], b, fresh[l])
			}
		}
		if got := s.(*session).cachedLangs(); !slices.Equal(got, tc.cached) {
			t.Errorf("%s: cached recognizers %q, want %q", tc.name, got, tc.cached)
		}
		for _, l := range tc.unknown {
			if _, _, err := infer(s, l); backends.ParamOf(err) != "language" {
				t.Errorf("%s: language %q: %v", tc.name, l, err)
			}
		}
	}
}
