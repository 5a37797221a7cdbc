package synth

import (
	"bytes"
	"math"
	"testing"
)

func TestF16(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff}, {1e9, 0x7c00}, {6e-8, 0x0001}, {1e-9, 0}, {float32(math.Inf(-1)), 0xfc00}} {
		if got := F16(c.f); got != c.h {
			t.Errorf("F16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
}

// The same dims and seed give the same bytes; another seed other weights.
func TestWriteIsDeterministic(t *testing.T) {
	a, err := Bytes(Tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Bytes(Tiny, 1)
	c, _ := Bytes(Tiny, 2)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatal("Bytes is not a function of dims and seed")
	}
	if Token(220) != " " || Token(TextVocab-1) != "" || Token(1)[0] != ' ' || Token(5)[0] == ' ' {
		t.Fatalf("vocabulary: %q %q %q %q", Token(220), Token(TextVocab-1), Token(1), Token(5))
	}
	if err := (Dims{State: 10, Heads: 3, AudioLayers: 1, TextLayers: 1, TextCtx: 64}).Check(); err == nil {
		t.Fatal("heads that do not divide the state accepted")
	}
}
