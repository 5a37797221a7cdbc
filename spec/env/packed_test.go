package env

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sluice-dev/sluice/core"
)

// TestPackRoundTrip: packing a label loses nothing.
func TestPackRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := Label{
			Kind:    core.EventKind(rapid.IntRange(0, 255).Draw(t, "kind")),
			Model:   rapid.Uint8().Draw(t, "model"),
			Op:      core.Op(rapid.IntRange(0, 15).Draw(t, "op")),
			Cfg:     rapid.Uint8().Draw(t, "cfg"),
			Bounded: rapid.Bool().Draw(t, "bounded"),
			Reason:  core.Reason(rapid.IntRange(0, 15).Draw(t, "reason")),
			Failed:  rapid.Bool().Draw(t, "failed"),
			Cap:     uint8(rapid.IntRange(0, 3).Draw(t, "cap")),
			Sel:     rapid.Uint8().Draw(t, "sel"),
			Fair:    rapid.Bool().Draw(t, "fair"),
			Alt:     rapid.Uint8().Draw(t, "alt"),
			Clone:   rapid.Uint8().Draw(t, "clone"),
			Ticket:  rapid.Uint64().Draw(t, "ticket"),
		}
		if got := l.Pack().Label(); got != l {
			t.Fatalf("%+v packed and unpacked is %+v", l, got)
		}
	})
}
