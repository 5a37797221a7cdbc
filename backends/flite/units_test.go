package flite

import (
	"strings"
	"testing"
)

// TestBoundUnits: English sentences up to SplitSentences' 300 characters
// stay one unit (their bytes do not change), and hostile units (one
// 4,000-character token, 4,000 digits, digits separated by spaces) are cut
// into pieces of at most maxUnitWords estimated words, or one token of at
// most maxToken characters, losing no character. On main each was one
// flite_text_to_wave call of 11 to 57 s at speed 0.25.
func TestBoundUnits(t *testing.T) {
	for _, s := range []string{
		"Turn on the kitchen lights.",
		longSentence,
		Sanitize(strings.Repeat("The committee will review every application before the end of the month, ", 4)),
		"Call me at 555 0134 on the 3rd of May 2024, or at 10:30.",
	} {
		if got := boundUnits(s); len(got) != 1 || got[0] != s {
			t.Errorf("%q cut into %q", s, got)
		}
	}
	for name, s := range map[string]string{
		"letters":        strings.Repeat("abcdefghij", 400),
		"digits":         strings.Repeat("1234567890", 400),
		"spaced digits":  strings.TrimSpace(strings.Repeat("7 ", 2000)),
		"one long digit": strings.Repeat("9", 30),
	} {
		got := boundUnits(s)
		if strings.ReplaceAll(strings.Join(got, ""), " ", "") != strings.ReplaceAll(s, " ", "") {
			t.Fatalf("%s: pieces lose or add characters", name)
		}
		for _, p := range got {
			words := 0
			for _, tok := range strings.Fields(p) {
				words += tokenWords(tok)
				if len(tok) > maxToken && len(got) > 1 {
					t.Fatalf("%s: token of %d characters kept", name, len(tok))
				}
			}
			if words > maxUnitWords && len(strings.Fields(p)) > 1 {
				t.Fatalf("%s: a piece of %d estimated words: %q", name, words, p)
			}
		}
		if name != "one long digit" && len(got) < 2 {
			t.Fatalf("%s: not cut", name)
		}
	}
}
