package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice/backends"
)

// swapLike is the design of llama-swap's swap group (proxy/processgroup.go
// ProcessGroup.ProxyRequest with swap: true, and proxy/process.go
// Process.ProxyRequest, start and Stop):
//
//   - one model of the group resident at a time; a request for another
//     model takes the group's mutex, stops the last used process and marks
//     its own model as the last used; Stop waits for the process's
//     in-flight requests to finish (inFlightRequests) before it tears the
//     engine down, and every other request of the group waits for the
//     mutex meanwhile;
//   - the process starts on demand inside its first request (start, then
//     the health check) and the others wait for that start;
//   - each process refuses a request beyond its concurrencyLimit at once
//     (429 there, 503 here) and a request reaching a stopping process (503);
//     below the limit requests wait for the upstream's parallel slots
//     without bound (llama.cpp's server queue);
//   - a config change restarts the changed model (proxy/config_reload.go
//     modelNeedsRestart): its process is stopped as above and started
//     again with the new config (apply starts it at once, as a preload).
//
// What it leaves out: the upstream is the engine in this process, not a
// child process behind a reverse proxy (so the start is the engine's load,
// without process spawn and health-check polling), groups other than one
// swap group holding every model, exclusive and persistent groups, TTL
// unloads, and the streamed loading status. The concurrency limit is the
// model's slots plus the workload's queue limit when it sets one, else
// llama-swap's default of 10.
type swapLike struct {
	eng backends.Engine

	group    sync.Mutex // ProcessGroup's embedded mutex
	lastUsed string
	procs    map[string]*process
}

// swapConcurrencyLimit is llama-swap's default concurrencyLimit.
const swapConcurrencyLimit = 10

// newSwapLike builds the group; hook, when set (tests), is called with
// "admitted" when a request took a place of its process's limit.
func newSwapLike(eng backends.Engine, specs models, maxQueue int, hook func(string)) *swapLike {
	s := &swapLike{eng: eng, procs: map[string]*process{}}
	for id, spec := range specs {
		limit := swapConcurrencyLimit
		if maxQueue > 0 {
			limit = spec.Slots + maxQueue
		}
		p := &process{eng: eng, spec: spec, limit: make(chan struct{}, limit), hook: hook}
		p.idle = sync.NewCond(&p.mu)
		s.procs[id] = p
	}
	return s
}

func (s *swapLike) infer(ctx context.Context, model string, input json.RawMessage) (answer, error) {
	p, ok := s.procs[model]
	if !ok {
		return answer{}, fmt.Errorf("%w: %s", errUnknown, model)
	}
	s.group.Lock()
	if s.lastUsed != model {
		if s.lastUsed != "" {
			s.procs[s.lastUsed].stop()
		}
		s.lastUsed = model
	}
	s.group.Unlock()
	return p.proxy(ctx, input)
}

// apply restarts model with the new config: like a request for it, it
// takes the group's mutex, stops the last used process and its own, and
// then starts with the new config (as its next request would).
func (s *swapLike) apply(ctx context.Context, model string, spec backends.Spec) error {
	p, ok := s.procs[model]
	if !ok {
		return fmt.Errorf("%w: %s", errUnknown, model)
	}
	s.group.Lock()
	if s.lastUsed != "" && s.lastUsed != model {
		s.procs[s.lastUsed].stop()
	}
	s.lastUsed = model
	p.stop()
	p.mu.Lock()
	spec.Version = p.spec.Version + 1
	p.spec = spec
	p.inflight++
	p.mu.Unlock()
	s.group.Unlock()
	defer p.leave()
	return p.start(ctx)
}

func (s *swapLike) close() {
	s.group.Lock()
	defer s.group.Unlock()
	for _, p := range s.procs {
		p.stop()
	}
}

type procState int

const (
	stateStopped procState = iota
	stateReady
	stateStopping
)

// process is llama-swap's Process over the in-process engine.
type process struct {
	eng   backends.Engine
	limit chan struct{} // concurrencyLimitSemaphore
	hook  func(string)

	startMu sync.Mutex // one start at a time; the others wait for it

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops to zero
	state    procState
	spec     backends.Spec
	pool     *pool
	inflight int // inFlightRequests
}

// proxy is Process.ProxyRequest.
func (p *process) proxy(ctx context.Context, input json.RawMessage) (answer, error) {
	p.mu.Lock()
	if p.state == stateStopping {
		p.mu.Unlock()
		return answer{}, fmt.Errorf("%w: process is stopping", errBusy)
	}
	p.mu.Unlock()
	select {
	case p.limit <- struct{}{}:
		defer func() { <-p.limit }()
		if p.hook != nil {
			p.hook("admitted")
		}
	default:
		return answer{}, fmt.Errorf("%w: too many requests", errBusy)
	}
	p.mu.Lock()
	p.inflight++
	p.mu.Unlock()
	defer p.leave()
	if err := p.start(ctx); err != nil {
		return answer{}, err
	}
	p.mu.Lock()
	pl := p.pool
	p.mu.Unlock()
	return pl.infer(ctx, "", input)
}

func (p *process) leave() {
	p.mu.Lock()
	p.inflight--
	if p.inflight == 0 {
		p.idle.Broadcast()
	}
	p.mu.Unlock()
}

// start loads the engine unless it is ready (start on demand).
func (p *process) start(ctx context.Context) error {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	p.mu.Lock()
	if p.state == stateReady {
		p.mu.Unlock()
		return nil
	}
	spec := p.spec
	p.mu.Unlock()
	pl, err := openPool(ctx, p.eng, spec)
	if err != nil {
		return fmt.Errorf("unable to start process: %w", err)
	}
	p.mu.Lock()
	p.pool, p.state = pl, stateReady
	p.mu.Unlock()
	return nil
}

// stop is Process.Stop: wait for the in-flight requests, then tear down.
func (p *process) stop() {
	p.mu.Lock()
	for p.inflight > 0 {
		p.idle.Wait()
	}
	if p.state != stateReady {
		p.mu.Unlock()
		return
	}
	p.state = stateStopping
	pl := p.pool
	p.pool = nil
	p.mu.Unlock()
	pl.close()
	p.mu.Lock()
	p.state = stateStopped
	p.mu.Unlock()
}
