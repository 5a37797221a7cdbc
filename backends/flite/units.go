package flite

import "strings"

// Bounding one synthesis call (CONTRACT.md engine.cancel). The streaming
// callback (stream.go) stops the vocoder, but everything before it (text
// analysis, the clustergen parameter track) runs in one native call per
// unit, and SplitSentences cuts a sentence only at spaces: a 4,000-
// character token took 11 s before its first audio at speed 0.25, and
// 4,000 digits 57 s (a loaded 2-core machine), while a 280-character
// English sentence (about 50 words) took 0.31 s. boundUnits cuts a
// sentence whose estimated spoken words pass maxUnitWords into pieces
// under it, so that part costs about half a second at most; a sentence
// under the bound is left as it is (same bytes as before).

// unitHook, when set (tests), is called with each unit before its
// synthesis call: what the request's native work is made of.
var unitHook func(unit string)

// maxUnitWords is the most estimated spoken words one synthesis call gets.
const maxUnitWords = 80

// maxToken is the longest token kept whole; a longer one (no English
// word is) is cut into pieces of this length.
const maxToken = 24

// tokenWords estimates the spoken words of a token: a plain word is one;
// a digit is read as about two words (measured 14 ms per digit against
// 6 ms per word), so three; a token past 12 characters is spelled or read
// in parts, one per character.
func tokenWords(tok string) int {
	w := 1
	if len(tok) > 12 {
		w = len(tok)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] >= '0' && tok[i] <= '9' {
			w += 3
		}
	}
	return w
}

// boundUnits returns sentence (sanitized, single-spaced) as pieces of at
// most maxUnitWords estimated words each: the sentence itself when it is
// under the bound.
func boundUnits(sentence string) []string {
	toks := strings.Fields(sentence)
	total := 0
	for _, t := range toks {
		total += tokenWords(t)
	}
	if total <= maxUnitWords {
		return []string{sentence}
	}
	var cut []string
	for _, t := range toks {
		for len(t) > maxToken {
			cut = append(cut, t[:maxToken])
			t = t[maxToken:]
		}
		cut = append(cut, t)
	}
	var out []string
	var cur []string
	words := 0
	for _, t := range cut {
		w := tokenWords(t)
		if len(cur) > 0 && words+w > maxUnitWords {
			out = append(out, strings.Join(cur, " "))
			cur, words = nil, 0
		}
		cur = append(cur, t)
		words += w
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, " "))
	}
	return out
}
