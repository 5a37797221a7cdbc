package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// ollamaLike is the design of ollama's server/sched.go (the Scheduler of
// InitScheduler, processPending, processCompleted, load,
// findRunnerToUnload, needsReload):
//
//   - one pending queue for all models (pendingReqCh, a buffered channel of
//     OLLAMA_MAX_QUEUE); a request that finds it full is refused at once
//     (ErrMaxQueue), and that is the only queue limit;
//   - one goroutine (processPending) takes the pending requests one at a
//     time and blocks the whole queue until the one in hand has a runner:
//     a loaded runner is handed out with refCount++ (useLoadedRunner); a
//     runner whose config changed (needsReload) or a victim when the
//     residency room (OLLAMA_MAX_LOADED_MODELS) is full is marked to expire
//     and the loop waits for its unload, which waits for its refCount to
//     reach zero;
//   - a load registers the runner with its refMu locked until the engine is
//     running, so the next pending request for that model blocks the loop
//     in needsReload for the whole load; a cold model finding another load
//     in progress is put back on the queue after reschedDelay (250 ms),
//     the single-GPU path (filterGPUsWithoutLoadingModels), so loads run
//     one at a time;
//   - the victim is the first idle runner in a sort by session duration
//     over the map's order (all durations are equal here, so it is any idle
//     runner, not the least recently used);
//   - a handed-out request waits for one of the runner's numParallel slots
//     without bound (the llama server's semaphore, llm/server.go), outside
//     the pending queue, so requests to a loaded model are never counted
//     against OLLAMA_MAX_QUEUE.
//
// What it leaves out: memory fitting and GPU placement (the room is a model
// count, OLLAMA_MAX_LOADED_MODELS), keep-alive expiry timers (the default
// session duration, 5 minutes, outlasts every workload), the VRAM recovery
// wait after an unload, and the CPU path's parallel loads. A reconfigure is
// a request whose options changed (needsReload); apply queues such a
// request with no inference and returns once it holds the new runner.
// Requests always want the model's current config.
type ollamaLike struct {
	eng          backends.Engine
	room         int
	reschedDelay time.Duration

	pending  chan *llmRequest
	finished chan *runnerRef // one per request that held a runner
	expired  chan *runnerRef
	unloaded chan struct{}

	loadedMu sync.Mutex
	loaded   map[string]*runnerRef

	specsMu sync.Mutex
	specs   models

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// hook, when set (tests), is called by the scheduling loop with
	// "handout" after it handed a runner to a request and "wait-unload"
	// when it starts waiting for an unload.
	hook func(event string)
}

func (s *ollamaLike) event(name string) {
	if s.hook != nil {
		s.hook(name)
	}
}

type runnerRef struct {
	refMu    sync.Mutex
	refCount int
	loading  bool
	expire   bool // sessionDuration = 0: unload once idle
	spec     backends.Spec
	pool     *pool // nil until loaded, or when the load failed
}

type llmRequest struct {
	ctx     context.Context
	model   string
	success chan *runnerRef
	errCh   chan error
}

// ollamaMaxQueue is OLLAMA_MAX_QUEUE's default.
const ollamaMaxQueue = 512

func newOllamaLike(eng backends.Engine, specs models, room, maxQueue int, hook func(string)) *ollamaLike {
	if maxQueue <= 0 {
		maxQueue = ollamaMaxQueue
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &ollamaLike{
		eng: eng, room: room, reschedDelay: 250 * time.Millisecond,
		pending:  make(chan *llmRequest, maxQueue),
		finished: make(chan *runnerRef, ollamaMaxQueue),
		expired:  make(chan *runnerRef, ollamaMaxQueue),
		unloaded: make(chan struct{}, ollamaMaxQueue),
		loaded:   map[string]*runnerRef{},
		specs:    specs,
		ctx:      ctx, cancel: cancel, hook: hook,
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.processPending() }()
	go func() { defer s.wg.Done(); s.processCompleted() }()
	return s
}

func (s *ollamaLike) current(model string) (backends.Spec, error) {
	s.specsMu.Lock()
	defer s.specsMu.Unlock()
	return s.specs.get(model)
}

// getRunner queues a request for model's runner (GetRunner): refused at
// once when the pending queue is full.
func (s *ollamaLike) getRunner(ctx context.Context, model string) (*runnerRef, error) {
	if _, err := s.current(model); err != nil {
		return nil, err
	}
	req := &llmRequest{ctx: ctx, model: model, success: make(chan *runnerRef, 1), errCh: make(chan error, 1)}
	select {
	case s.pending <- req:
	default:
		return nil, fmt.Errorf("%w: maximum pending requests exceeded", errBusy)
	}
	select {
	case r := <-req.success:
		return r, nil
	case err := <-req.errCh:
		return nil, err
	case <-ctx.Done():
		// A runner handed out after the client left is given back.
		go func() {
			select {
			case r := <-req.success:
				s.done(r)
			case <-req.errCh:
			case <-s.ctx.Done():
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// done is the end of a request holding r (the finished event).
func (s *ollamaLike) done(r *runnerRef) {
	select {
	case s.finished <- r:
	case <-s.ctx.Done():
	}
}

func (s *ollamaLike) infer(ctx context.Context, model string, input json.RawMessage) (answer, error) {
	r, err := s.getRunner(ctx, model)
	if err != nil {
		return answer{}, err
	}
	defer s.done(r)
	return r.pool.infer(ctx, "", input) // numParallel slots, waited for without bound
}

func (s *ollamaLike) apply(ctx context.Context, model string, spec backends.Spec) error {
	s.specsMu.Lock()
	old, err := s.specs.get(model)
	if err == nil {
		spec.Version = old.Version + 1
		s.specs[model] = spec
	}
	s.specsMu.Unlock()
	if err != nil {
		return err
	}
	r, err := s.getRunner(ctx, model)
	if err != nil {
		return err
	}
	s.done(r)
	return nil
}

func (s *ollamaLike) processPending() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.unloaded: // an unload with nothing pending
		case pending := <-s.pending:
			if pending.ctx.Err() != nil {
				continue
			}
			if !s.schedule(pending) {
				return
			}
		}
	}
}

// schedule is the inner loop of processPending for one request; it returns
// false when the scheduler is shutting down.
func (s *ollamaLike) schedule(pending *llmRequest) bool {
	for {
		want, err := s.current(pending.model)
		if err != nil {
			pending.errCh <- err
			return true
		}
		var toExpire *runnerRef
		s.loadedMu.Lock()
		runner := s.loaded[pending.model]
		count := len(s.loaded)
		s.loadedMu.Unlock()
		switch {
		case runner != nil:
			if runner.needsReload(want) {
				toExpire = runner
			} else {
				runner.use(pending)
				s.event("handout")
				return true
			}
		case s.room > 0 && count >= s.room:
			toExpire = s.findRunnerToUnload()
		case s.anyLoading():
			// Another model is loading on the (one) GPU: try again later.
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				t := time.NewTimer(s.reschedDelay)
				defer t.Stop()
				select {
				case <-t.C:
					select {
					case s.pending <- pending:
					case <-s.ctx.Done():
					}
				case <-s.ctx.Done():
				}
			}()
			return true
		default:
			s.load(pending, want)
			return true
		}
		toExpire.refMu.Lock()
		toExpire.expire = true
		if toExpire.refCount <= 0 {
			s.expired <- toExpire
		}
		toExpire.refMu.Unlock()
		// Every pending request now waits, whatever its model.
		s.event("wait-unload")
		select {
		case <-s.ctx.Done():
			pending.errCh <- s.ctx.Err()
			return false
		case <-s.unloaded:
		}
	}
}

func (s *ollamaLike) anyLoading() bool {
	s.loadedMu.Lock()
	defer s.loadedMu.Unlock()
	for _, r := range s.loaded {
		if r.loading {
			return true
		}
	}
	return false
}

// needsReload takes refMu, so it waits for a load in progress.
func (r *runnerRef) needsReload(want backends.Spec) bool {
	r.refMu.Lock()
	defer r.refMu.Unlock()
	return r.pool == nil || r.spec.Version != want.Version
}

func (r *runnerRef) use(pending *llmRequest) {
	r.refMu.Lock()
	defer r.refMu.Unlock()
	r.refCount++
	pending.success <- r
}

// load registers the runner, locked until its engine runs, and loads it
// under the requester's context (WaitUntilRunning(req.ctx)).
func (s *ollamaLike) load(pending *llmRequest, spec backends.Spec) {
	r := &runnerRef{spec: spec, loading: true, refCount: 1}
	r.refMu.Lock()
	s.loadedMu.Lock()
	s.loaded[pending.model] = r
	s.loadedMu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer r.refMu.Unlock()
		p, err := openPool(pending.ctx, s.eng, spec)
		s.loadedMu.Lock()
		r.loading = false
		s.loadedMu.Unlock()
		if err != nil {
			r.refCount--
			pending.errCh <- err
			s.expired <- r
			return
		}
		r.pool = p
		pending.success <- r
	}()
}

// findRunnerToUnload: the first idle runner in duration order (all equal:
// the map's order), else the first.
func (s *ollamaLike) findRunnerToUnload() *runnerRef {
	s.loadedMu.Lock()
	list := make([]*runnerRef, 0, len(s.loaded))
	for _, r := range s.loaded {
		list = append(list, r)
	}
	s.loadedMu.Unlock()
	if len(list) == 0 {
		return nil
	}
	// sched.go sorts by session duration first; every duration is the
	// default here, so the order stays the map's.
	for _, r := range list {
		r.refMu.Lock()
		rc := r.refCount
		r.refMu.Unlock()
		if rc == 0 {
			return r
		}
	}
	return list[0]
}

func (s *ollamaLike) processCompleted() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case r := <-s.finished:
			r.refMu.Lock()
			r.refCount--
			if r.refCount <= 0 && r.expire {
				s.expired <- r
			}
			r.refMu.Unlock()
		case r := <-s.expired:
			r.refMu.Lock()
			if r.refCount > 0 {
				// Not idle yet: try again shortly, as sched.go does.
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					t := time.NewTimer(10 * time.Millisecond)
					defer t.Stop()
					select {
					case <-t.C:
						s.expired <- r
					case <-s.ctx.Done():
					}
				}()
				r.refMu.Unlock()
				continue
			}
			s.loadedMu.Lock()
			if r.pool != nil {
				r.pool.close()
				r.pool = nil
			}
			if s.loaded[r.spec.Model] == r {
				delete(s.loaded, r.spec.Model)
			}
			s.loadedMu.Unlock()
			r.refMu.Unlock()
			s.unloaded <- struct{}{}
		}
	}
}

func (s *ollamaLike) close() {
	s.cancel()
	s.wg.Wait()
	s.loadedMu.Lock()
	defer s.loadedMu.Unlock()
	for id, r := range s.loaded {
		if r.pool != nil {
			r.pool.close()
		}
		delete(s.loaded, id)
	}
}
