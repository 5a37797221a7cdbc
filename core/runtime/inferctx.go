package runtime

import (
	"context"
	"sync"
	"sync/atomic"
)

// inferCtx is the context of one engine call: done when the caller's
// context is (the client went away) or when Shutdown's deadline cancels
// backend work (the runtime's work context). Deriving that merge eagerly
// costs a cancelCtx, a registration in the caller's context (net/http
// allocates its children map for it) and one in the work context, about
// 1.4 µs per request in `make bench-http`; most calls of a fast engine
// never look at Done. So the merge is built the first time Done is called,
// or when Err finds the work context ended; until then Err, Deadline and
// Value answer from the two contexts directly. context.Cause stays exact:
// Value answers from the merged context once it exists, and it exists
// whenever the work context is what ended the call.
type inferCtx struct {
	context.Context // the caller's: deadline and values
	work            context.Context

	once   sync.Once
	merged atomic.Pointer[context.Context]
	stop   func() bool
	cancel context.CancelFunc
}

func newInferCtx(caller, work context.Context) *inferCtx {
	return &inferCtx{Context: caller, work: work}
}

// merge builds the merged context once.
func (c *inferCtx) merge() context.Context {
	c.once.Do(func() {
		m, cancel := context.WithCancel(c.Context)
		c.stop, c.cancel = context.AfterFunc(c.work, cancel), cancel
		if c.work.Err() != nil { // AfterFunc would cancel on another goroutine: be exact now
			cancel()
		}
		c.merged.Store(&m)
	})
	return *c.merged.Load()
}

// Done implements context.Context.
func (c *inferCtx) Done() <-chan struct{} { return c.merge().Done() }

// Err implements context.Context.
func (c *inferCtx) Err() error {
	if m := c.merged.Load(); m != nil {
		return (*m).Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.work.Err() != nil {
		return c.merge().Err()
	}
	return nil
}

// Value implements context.Context.
func (c *inferCtx) Value(key any) any {
	if m := c.merged.Load(); m != nil {
		return (*m).Value(key)
	}
	return c.Context.Value(key)
}

// release frees the merge, if one was built. Call it when the engine call
// has returned.
func (c *inferCtx) release() {
	if c.merged.Load() != nil {
		c.stop()
		c.cancel()
	}
}
