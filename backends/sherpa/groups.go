package sherpa

import (
	"unicode"
	"unicode/utf8"
)

// groupChars bounds the text (bytes) of one generate call. The library
// returns a call's whole synthesis as one float32 array (and grows and
// copies it on the way), so its native memory follows the text of the
// call: a 4,096-character request at speed 0.25 held about 266 MB for
// Matcha. speak calls it once per group of whole sentences of at most
// this many bytes, handing each group's samples on before the next, so a
// request's native memory is one group's (about 20 s of speech at speed
// 1). A variable so tests can compare against one whole-text call.
var groupChars = 300

// sentenceGroups cuts text into consecutive pieces, joined back the text
// itself, of at most limit bytes each, cut after a sentence's end where
// one is close enough: greedily as many whole sentences as fit; a
// sentence longer than limit is cut at its last space that fits, else at
// a rune boundary. A sentence ends after . ! ? or their CJK forms
// and the closing quotes or brackets that follow, plus the spaces after
// it (CJK marks need no space after them); the cuts are where the
// library's own sentence splitting cuts too for ordinary prose, so the
// samples are those of one whole-text call (see TestGroupsEqualWhole).
func sentenceGroups(text string, limit int) []string {
	var groups []string
	for len(text) > limit {
		cut := 0
		for _, e := range sentenceEnds(text[:limit+1]) {
			if e <= limit {
				cut = e
			}
		}
		if cut == 0 {
			cut = lastSpaceCut(text[:limit])
		}
		if cut == 0 {
			cut = limit
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			if cut == 0 { // limit is shorter than one rune
				_, cut = utf8.DecodeRuneInString(text)
			}
		}
		groups = append(groups, text[:cut])
		text = text[cut:]
	}
	if text != "" {
		groups = append(groups, text)
	}
	return groups
}

// sentenceEnds returns the offsets just past each sentence end in s (see
// sentenceGroups), the trailing spaces included.
func sentenceEnds(s string) []int {
	var ends []int
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		cjk := false
		switch r {
		case '.', '!', '?':
		case '。', '！', '？':
			cjk = true
		default:
			continue
		}
		// Closing marks after the end belong to the sentence.
		for i < len(s) {
			c, m := utf8.DecodeRuneInString(s[i:])
			if !(unicode.Is(unicode.Pe, c) || unicode.Is(unicode.Pf, c) || c == '"' || c == '\'' || c == '.' || c == '!' || c == '?') {
				break
			}
			i += m
		}
		j := i
		for j < len(s) {
			c, m := utf8.DecodeRuneInString(s[j:])
			if !unicode.IsSpace(c) {
				break
			}
			j += m
		}
		if j > i || cjk || j == len(s) {
			ends = append(ends, j)
			i = j
		}
	}
	return ends
}

// lastSpaceCut returns the offset just past the last space run in s, or
// 0 when s has none past its start.
func lastSpaceCut(s string) int {
	for i := len(s); i > 0; {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if unicode.IsSpace(r) {
			return i
		}
		i -= n
	}
	return 0
}
