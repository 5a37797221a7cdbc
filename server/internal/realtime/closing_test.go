package realtime

import (
	"strings"
	"testing"
)

// A turn's last delta says what its deltas have not: the deltas then
// concatenate to the transcript's words; a transcript that revises what
// was said, or adds nothing, gets no last delta (live.transcribe).
func TestClosingDelta(t *testing.T) {
	for _, c := range []struct {
		final, said, rest string
		ok                bool
	}{
		{" And so my fellow Americans", "And so", " my fellow Americans", true},
		{"And so my", "", "And so my", true},
		{"And  so\tmy", "And so", " my", true},
		{"And so", "And so", "", false},
		{"And sow my", "And so", "", false}, // "so" became "sow": not a word boundary
		{"Ask not", "And so", "", false},    // revised
		{"", "", "", false},
	} {
		rest, ok := closingDelta(c.final, c.said)
		if rest != c.rest || ok != c.ok {
			t.Errorf("closingDelta(%q, %q) = %q, %v; want %q, %v", c.final, c.said, rest, ok, c.rest, c.ok)
		}
		if ok && c.said+rest != joinFields(c.final) {
			t.Errorf("%q + %q is not the transcript's words %q", c.said, rest, joinFields(c.final))
		}
	}
}

func joinFields(s string) string { return strings.Join(strings.Fields(s), " ") }
