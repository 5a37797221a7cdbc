package sherpa

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// sentenceGroups joins back to the text, keeps each group within the
// limit and cuts after sentence ends when one fits.
func TestSentenceGroups(t *testing.T) {
	for _, c := range []struct {
		text  string
		limit int
		want  []string
	}{
		{"One. Two. Three.", 100, []string{"One. Two. Three."}},
		{"One. Two. Three.", 10, []string{"One. Two. ", "Three."}},
		{"One. Two. Three.", 6, []string{"One. ", "Two. ", "Three."}},
		{`He said "stop!" Then left.`, 20, []string{`He said "stop!" `, "Then left."}},
		{"Pi is 3.14 today. Yes.", 12, []string{"Pi is 3.14 ", "today. Yes."}},
		{"a long sentence without an end", 12, []string{"a long ", "sentence ", "without an ", "end"}},
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"你好。世界！再见", 9, []string{"你好。", "世界！", "再见"}},
		{"ééé", 3, []string{"é", "é", "é"}},
		{"é", 1, []string{"é"}},
	} {
		got := sentenceGroups(c.text, c.limit)
		if !slices.Equal(got, c.want) {
			t.Errorf("%q at %d: %q, want %q", c.text, c.limit, got, c.want)
		}
	}
	long := strings.Repeat("Please water the plants on Saturday. ", 120) // 4,440 bytes
	groups := sentenceGroups(long, groupChars)
	if strings.Join(groups, "") != long || len(groups) < len(long)/groupChars {
		t.Fatalf("%d groups do not join back to the text", len(groups))
	}
	for _, g := range groups {
		if len(g) > groupChars || !strings.HasSuffix(g, ". ") {
			t.Fatalf("group of %d bytes %q: not whole sentences within %d", len(g), g, groupChars)
		}
	}
}

// withGroupChars runs f with groupChars set to n.
func withGroupChars(t *testing.T, n int, f func()) {
	t.Helper()
	old := groupChars
	groupChars = n
	defer func() { groupChars = old }()
	f()
}

// TestGroupsEqualWhole: for every TTS family, text spoken in groups of a
// sentence or two (one generate call each) is the samples of one
// whole-text call, streamed or not: the groups cut where the library's
// own sentence splitting does. Not so for the multi-language Kokoro,
// whose frontend joins short sentences into one piece by their phoneme
// count (its "Is this the second one? Yes!" is one piece, synthesised
// together), so a cut between two sentences it would have joined changes
// the audio there: its answer is each group's own answer in turn (the
// same bytes for the same text, whatever the groups' size was before).
func TestGroupsEqualWhole(t *testing.T) {
	root := testRoot(t)
	e := New(Config{})
	text := `First sentence here. Is this the second one? Yes! "Quoted," she said. And a fifth, longer sentence to end with.`
	const limit = 48 // three groups, cut after sentences
	in := func(s string) string { return `{"text":` + jsonString(s) + `}` }
	for _, name := range []string{PiperSynthetic, PiperMultiSynthetic, KokoroSynthetic, KokoroMultiSynthetic, KittenSynthetic, MatchaSynthetic, MatchaVocosSynthetic} {
		t.Run(name, func(t *testing.T) {
			s := open(t, e, root, name, "")
			var whole, grouped, streamed []int16
			withGroupChars(t, len(text), func() {
				if name != KokoroMultiSynthetic {
					whole = speak(t, s, in(text))
					return
				}
				for _, g := range sentenceGroups(text, limit) {
					whole = append(whole, speak(t, s, in(g))...)
				}
			})
			withGroupChars(t, limit, func() {
				grouped = speak(t, s, in(text))
				_, err := s.Infer(context.Background(), backends.Request{Input: []byte(in(text)), Stream: true}, func(c json.RawMessage) error {
					b, _, err := audio.DecodeChunk(c)
					if err != nil {
						return err
					}
					p, _ := audio.PCM16(b)
					streamed = append(streamed, p...)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
			if len(whole) == 0 || !slices.Equal(whole, grouped) {
				t.Errorf("in groups %d samples, whole %d: equal %v", len(grouped), len(whole), slices.Equal(whole, grouped))
			}
			if !slices.Equal(grouped, streamed) {
				t.Errorf("streamed %d samples, not the %d of the answer", len(streamed), len(grouped))
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestCancelBetweenGroups: a context ended while a group is synthesised
// starts no further group (the loop checks it between calls).
func TestCancelBetweenGroups(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, PiperSynthetic, "")
	ctx, cancel := context.WithCancel(context.Background())
	groups := 0
	testHook = func(point string) {
		if point == "tts-group" {
			groups++
			cancel() // the client goes away during the first group
		}
	}
	defer func() { testHook = nil }()
	withGroupChars(t, 10, func() {
		_, err := s.Infer(ctx, backends.Request{Input: []byte(`{"text":"One two. Three four. Five six. Seven."}`)}, nil)
		if !errors.Is(err, context.Canceled) || groups != 1 {
			t.Errorf("got %v after %d groups, want context.Canceled after 1", err, groups)
		}
	})
}

// TestLongTextInGroups: a request of audio.MaxTextLen characters reaches
// the library in many calls, none over groupChars bytes, so the native
// memory of one call is one group's synthesis.
func TestLongTextInGroups(t *testing.T) {
	root := testRoot(t)
	s := open(t, New(Config{}), root, PiperSynthetic, "")
	text := strings.Repeat("The committee will review every application. ", audio.MaxTextLen/46)
	calls := 0
	testHook = func(point string) {
		if point == "tts-group" {
			calls++
		}
	}
	defer func() { testHook = nil }()
	if got := speak(t, s, `{"text":`+jsonString(text)+`}`); len(got) == 0 {
		t.Fatal("no audio")
	}
	if want := len(text)/groupChars + 1; calls < want {
		t.Errorf("%d bytes of text in %d generate calls, want at least %d", len(text), calls, want)
	}
}
