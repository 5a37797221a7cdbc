package evalset

import (
	"context"
	"slices"
	"testing"
)

// A set depends on its spec alone; its turns are in order, apart, inside
// the recording, and every chosen voice speaks.
func TestDeterministicAndWellFormed(t *testing.T) {
	ctx := context.Background()
	g, err := NewGenerator(ctx)
	if err != nil {
		t.Fatalf("flite (make deps): %v", err)
	}
	defer g.Close(ctx)
	sp := Spec{Name: "x", Speakers: 3, Recordings: 1, Seconds: 4, Seed: 5}
	a, err := g.Generate(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := g.Generate(ctx, sp)
	if !slices.Equal(a[0].Samples, b[0].Samples) || !slices.Equal(a[0].Ref, b[0].Ref) {
		t.Fatal("same spec, different recordings")
	}
	voices := map[string]bool{}
	prev := 0.0
	for _, tr := range a[0].Ref {
		if tr.Start < prev || tr.End <= tr.Start || tr.End > a[0].Seconds() {
			t.Fatalf("bad turn %+v after %v", tr, prev)
		}
		prev = tr.End
		voices[tr.Speaker] = true
	}
	if len(voices) != 3 || a[0].Seconds() < 4 {
		t.Fatalf("%d voices, %.1f s", len(voices), a[0].Seconds())
	}
	if _, err := g.Generate(ctx, Spec{Speakers: 5, Recordings: 1}); err == nil {
		t.Fatal("5 speakers from 4 voices")
	}
}
