// Package pollctx is a context for cancellation tests: it ends at the
// n-th call of its Err method, so a test cancels a request at a chosen
// point inside an engine's work without a clock (CONTRACT.md
// engine.cancel). backends/engines' harness and the engines' own tests
// share it.
package pollctx

import (
	"context"
	"sync"
)

// Ctx is a context that ends at the n-th call of its Err method: an
// engine that checks its context between pieces of work sees it end
// there, in the middle of the work, with no clock involved (contract
// engine.cancel). Done is closed at that call too, so engines that wait
// on it (context.AfterFunc, native abort flags) see the same end.
type Ctx struct {
	context.Context
	mu    sync.Mutex
	n     int
	calls int
	done  chan struct{}
}

// New returns a Ctx ending at the n-th Err call.
func New(n int) *Ctx {
	return &Ctx{Context: context.Background(), n: n, done: make(chan struct{})}
}

// Done implements context.Context.
func (c *Ctx) Done() <-chan struct{} { return c.done }

// Err implements context.Context and counts the call.
func (c *Ctx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls == c.n {
		close(c.done)
	}
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

// Calls is how many times Err was called.
func (c *Ctx) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}
