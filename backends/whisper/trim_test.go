package whisper

import (
	"context"
	"testing"
)

// TestCloseTrimsHeap (engine.native-memory): freeing a pool's context
// returns the C heap's free pages, once, when its last session closes.
// Without it `make soak-engines` measured whisper's resident set at 1.19
// and 1.20x from 10 to 200 load/unload cycles (73 -> 87 MB), over the
// 1.2x bound; with it 1.02x (55 -> 56 MB).
func TestCloseTrimsHeap(t *testing.T) {
	calls := 0
	old := trimHeap
	trimHeap = func() { calls++ }
	t.Cleanup(func() { trimHeap = old })
	s, _, err := New().Open(context.Background(), spec(tiny(t), 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Clone(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("trimmed %d times with a session still open", calls)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("trimmed %d times after the last session closed, want 1", calls)
	}
}
