package realtime

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/sluice-dev/sluice/backends"
)

// The queue between the reader and the engine holds at most its cap: a push
// past it waits until the engine has taken enough, and a closed queue
// fails a waiting push (CONTRACT.md live.backpressure).
func TestLiveQueueBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newLiveQueue(100)
		ctx := context.Background()
		piece := backends.LivePiece{Samples: make([]int16, 60), Rate: Rate}
		if err := q.push(ctx, piece); err != nil {
			t.Fatal(err)
		}
		pushed := make(chan error, 1)
		go func() { pushed <- q.push(ctx, piece) }()
		synctest.Wait()
		select {
		case err := <-pushed:
			t.Fatalf("a push past the cap did not wait: %v", err)
		default:
		}
		if err := q.push(ctx, backends.LivePiece{Commit: true}); err != nil { // a commit has no samples: never waits
			t.Fatal(err)
		}
		if p, err := q.Next(ctx); err != nil || len(p.Samples) != 60 {
			t.Fatalf("next: %v %v", p, err)
		}
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
		if q.peakSamples() > 100 {
			t.Errorf("peak %d samples over the cap", q.peakSamples())
		}
		go func() { pushed <- q.push(ctx, piece) }()
		synctest.Wait()
		q.close()
		if err := <-pushed; err != errQueueClosed {
			t.Errorf("a push waiting at the close: %v", err)
		}
		for _, want := range []bool{true, false} { // the commit, then the second piece
			p, err := q.Next(ctx)
			if err != nil || p.Commit != want {
				t.Fatalf("next after close: %+v %v", p, err)
			}
		}
		if _, err := q.Next(ctx); err == nil {
			t.Fatal("no end after the queued pieces")
		}
	})
}
