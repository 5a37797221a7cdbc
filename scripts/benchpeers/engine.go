package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluice-dev/sluice/backends"
)

// countingEngine wraps the engine every design serves (the fixture, or one
// real engine) under one name, and counts the loads (Open calls), so that
// "loads per 100 requests" is counted the same way for Sluice and for the
// stand-ins.
type countingEngine struct {
	backends.Engine
	name  string
	loads atomic.Int64
}

func newCountingEngine(name string, e backends.Engine) *countingEngine {
	return &countingEngine{Engine: e, name: name}
}

// Name is the engine name the workloads' model specs use.
func (c *countingEngine) Name() string { return c.name }

// Open counts one load and opens the primary.
func (c *countingEngine) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	c.loads.Add(1)
	return c.Engine.Open(ctx, spec)
}

// Loads is how many loads (primaries opened) were started so far.
func (c *countingEngine) Loads() int64 { return c.loads.Load() }

// pool is what a stand-in keeps for one loaded model: slots sessions over
// one primary (the primary and its clones, as the runtime builds them) and a
// free list of them. It is the "llama server" of the stand-ins: an engine
// process with a fixed number of parallel slots, whose callers wait for a
// free one without bound (llama.cpp's server queues tasks the same way).
type pool struct {
	spec     backends.Spec
	sessions []backends.Session
	free     chan int
}

// openPool validates spec and opens its slots sessions.
func openPool(ctx context.Context, eng backends.Engine, spec backends.Spec) (*pool, error) {
	if err := eng.Validate(spec); err != nil {
		return nil, err
	}
	primary, capacity, err := eng.Open(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", spec.Model, err)
	}
	p := &pool{spec: spec, sessions: []backends.Session{primary}, free: make(chan int, spec.Slots)}
	if capacity < spec.Slots {
		p.close()
		return nil, fmt.Errorf("load %s: capacity %d below %d slots", spec.Model, capacity, spec.Slots)
	}
	for i := 1; i < spec.Slots; i++ {
		s, err := primary.Clone(ctx, i)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("load %s: clone %d: %w", spec.Model, i, err)
		}
		p.sessions = append(p.sessions, s)
	}
	for i := range p.sessions {
		p.free <- i
	}
	return p, nil
}

// infer waits for a free slot (or the end of ctx) and runs one request on
// it.
func (p *pool) infer(ctx context.Context, id string, input []byte) (answer, error) {
	var slot int
	select {
	case slot = <-p.free:
	case <-ctx.Done():
		return answer{}, fmt.Errorf("waiting for a slot of %s: %w", p.spec.Model, context.Cause(ctx))
	}
	defer func() { p.free <- slot }()
	out, err := p.sessions[slot].Infer(ctx, backends.Request{ID: id, Slot: slot, Input: input, Version: p.spec.Version}, nil)
	if err != nil {
		return answer{}, err
	}
	return answer{Output: out, Version: p.spec.Version, Slot: slot}, nil
}

// close closes every session, clones first (the caller makes sure no
// request runs on them any more).
func (p *pool) close() {
	var errs []error
	for i := len(p.sessions) - 1; i >= 0; i-- {
		errs = append(errs, p.sessions[i].Close(context.Background()))
	}
	p.sessions = nil
	_ = errors.Join(errs...) // teardown failures do not change the scheduling measured here
}

// answer is one request's result, what every design's HTTP front encodes.
type answer struct {
	Output  backends.Output
	Version uint64
	Slot    int
}
