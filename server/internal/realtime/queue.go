package realtime

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/sluice-dev/sluice/backends"
)

// liveQueue is a live session's audio on its way to the engine
// (backends.LiveAudio): the reader pushes pieces, the engine takes them
// with Next. It holds at most max samples not yet taken
// (CONTRACT.md live.backpressure): a push that would pass that waits until
// the engine has taken enough, so the reader stops reading the socket and
// TCP's flow control slows the client, instead of memory growing.
type liveQueue struct {
	mu      sync.Mutex
	pieces  []backends.LivePiece
	samples int // buffered, not yet taken
	max     int
	closed  bool
	peak    int // the most samples ever buffered (tests, bench)

	wake    chan struct{} // cap 1: a piece or the end for Next
	space   chan struct{} // cap 1: room for a waiting push
	started chan struct{} // closed at the first push
	once    sync.Once
}

var errQueueClosed = errors.New("the session is ending")

func newLiveQueue(maxSamples int) *liveQueue {
	return &liveQueue{max: max(1, maxSamples), wake: make(chan struct{}, 1), space: make(chan struct{}, 1), started: make(chan struct{})}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// push appends p, waiting while the queue is full (a piece larger than the
// whole cap waits for an empty queue). It fails once the queue is closed or
// ctx ends.
func (q *liveQueue) push(ctx context.Context, p backends.LivePiece) error {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return errQueueClosed
		}
		if n := len(p.Samples); n == 0 || q.samples == 0 || q.samples+n <= q.max {
			q.pieces = append(q.pieces, p)
			q.samples += n
			q.peak = max(q.peak, q.samples)
			q.mu.Unlock()
			q.once.Do(func() { close(q.started) })
			signal(q.wake)
			return nil
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Next implements backends.LiveAudio: the next piece, io.EOF once the queue
// is closed and empty.
func (q *liveQueue) Next(ctx context.Context) (backends.LivePiece, error) {
	for {
		q.mu.Lock()
		if len(q.pieces) > 0 {
			p := q.pieces[0]
			q.pieces[0] = backends.LivePiece{}
			q.pieces = q.pieces[1:]
			q.samples -= len(p.Samples)
			q.mu.Unlock()
			signal(q.space)
			return p, nil
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return backends.LivePiece{}, io.EOF
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return backends.LivePiece{}, context.Cause(ctx)
		}
	}
}

// close ends the input: pieces already pushed are still taken, then
// io.EOF; a waiting push fails.
func (q *liveQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.wake)
	signal(q.space)
}

// peakSamples returns the most samples ever buffered.
func (q *liveQueue) peakSamples() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.peak
}
