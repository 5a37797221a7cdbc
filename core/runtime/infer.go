package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// InferOptions are the per-request settings of Infer.
type InferOptions struct {
	// Timeout overrides the admission timeout: nil uses the model's (or the
	// server's) default, 0 waits without bound; the server ceiling bounds
	// every value.
	Timeout *time.Duration
	// Emit, when set, makes the request a stream: every chunk goes through
	// it before Infer returns. An error from Emit (the client went away)
	// stops the stream and releases the lease.
	Emit backends.Emit

	_ struct{}
}

// Result is a finished request: the engine's output and the model, config
// version and slot it ran on.
type Result struct {
	Output  backends.Output
	Model   string
	Version uint64
	Slot    int
}

// grant is an admitted request: its ticket, slot, bound version and session.
type grant struct {
	tk      core.Ticket
	slot    int
	version uint64
	sess    backends.Session
	task    string // the task of the config the granted pool was built from
	engine  string // the engine of that config
}

// coreTimeout converts an admission timeout override into the core's form.
func coreTimeout(id string, d *time.Duration) (int64, error) {
	if d == nil {
		return core.NoTimeout, nil
	}
	if *d < 0 {
		return 0, invalidf(nil, "model %q: admission timeout must not be negative", id)
	}
	return int64(*d), nil
}

// Infer runs one request on model id (a model ID or one of its aliases,
// names.go): admission through the model's FIFO,
// then the engine call on the granted session, then the release. The lease
// is held until Infer returns, so a stream holds it until its last chunk was
// emitted or an emit failed (CONTRACT.md phase.stream-deferred).
// Every lease is released exactly once, also when the engine panics, fails
// or the context ends.
func (r *Runtime) Infer(ctx context.Context, id string, req backends.Request, o InferOptions) (Result, error) {
	timeout, err := coreTimeout(id, o.Timeout)
	if err != nil {
		return Result{}, err
	}
	g, model, err := r.acquire(ctx, id, timeout, req.ID, nil)
	if err != nil {
		return Result{}, err
	}
	failed := true
	defer func() { r.release(g.tk, failed) }()
	out, err := r.runInfer(ctx, model, &g, req, o.Emit)
	if err != nil {
		return Result{}, err
	}
	failed = false
	return Result{Output: out, Model: model, Version: g.version, Slot: g.slot}, nil
}

// Acquire admits one request on model id (a model ID or one of its
// aliases: Lease.Model says which model) and returns its lease, for
// responses deferred beyond one call. timeout is as InferOptions.Timeout.
// The caller must Release the lease exactly once it is finished with it
// (further Releases do nothing); Shutdown waits for every lease.
func (r *Runtime) Acquire(ctx context.Context, id string, timeout *time.Duration) (*Lease, error) {
	d, err := coreTimeout(id, timeout)
	if err != nil {
		return nil, err
	}
	l := &Lease{r: r, model: id}
	g, model, err := r.acquire(ctx, id, d, "", &l.id)
	if err != nil {
		return nil, err
	}
	l.g, l.model = g, model
	return l, nil
}

// AcquireTask is Acquire for a request that needs a model of task (the
// OpenAI task endpoints, CONTRACT.md err.wrong-task): a model registered
// for another task is refused before the request queues, and the task is
// checked again on the lease's own snapshot, the config its pool was built
// from, so a concurrent reconfigure that changed the task between the two
// never hands out a lease of the wrong task (the lease is given back at
// once). The refusal is an ErrInvalid *Error wrapping a *TaskError.
func (r *Runtime) AcquireTask(ctx context.Context, id, task string, timeout *time.Duration) (*Lease, error) {
	d, err := coreTimeout(id, timeout)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	have, known := "", false
	if h, _, ok := r.resolveLocked(id); ok {
		have, known = r.m.Config(h).Task, true
	}
	r.mu.Unlock()
	if known && have != task {
		return nil, taskError(id, have, task)
	}
	l := &Lease{r: r, model: id}
	g, model, err := r.acquire(ctx, id, d, "", &l.id)
	if err != nil {
		return nil, err
	}
	if g.task != task {
		r.release(g.tk, false)
		return nil, taskError(id, g.task, task)
	}
	l.g, l.model = g, model
	return l, nil
}

// TaskError is a request for a task the model does not serve.
type TaskError struct {
	Model, Have, Want string
}

func (e *TaskError) Error() string {
	got := "no task"
	if e.Have != "" {
		got = fmt.Sprintf("task %q", e.Have)
	}
	return fmt.Sprintf("model %q serves %s, not %q", e.Model, got, e.Want)
}

func taskError(id, have, want string) *Error {
	te := &TaskError{Model: id, Have: have, Want: want}
	return &Error{Code: core.CodeInvalid, Msg: te.Error(), Err: te}
}

// Lease is an admitted request's hold on one session of a model's published
// pool, bound to one committed config version.
type Lease struct {
	r        *Runtime
	g        grant
	model    string
	id       idCell // the request's ID, for Busy (noted by Infer)
	reqID    string // what id points to once noted: the lease's own copy
	released atomic.Bool
}

// Model returns the model ID (the one the request's name resolved to).
func (l *Lease) Model() string { return l.model }

// Slot returns the slot (session index) the lease holds.
func (l *Lease) Slot() int { return l.g.slot }

// Version returns the config version the request is bound to.
func (l *Lease) Version() uint64 { return l.g.version }

// Engine returns the engine of the config the leased pool was built from:
// the lease's own snapshot, which a concurrent reconfigure cannot change,
// for a caller whose eligibility depends on the engine (a live session
// needs an engine that takes live audio, CONTRACT.md live.handshake).
func (l *Lease) Engine() string { return l.g.engine }

// Infer runs req on the leased session (one call at a time per lease). It
// does not release the lease. Engine panics come back as CodeBackend errors.
func (l *Lease) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if l.released.Load() {
		return backends.Output{}, &Error{Code: core.CodeBackend, Msg: fmt.Sprintf("model %q: lease already released", l.model)}
	}
	if req.ID != "" && l.id.v.Load() == nil {
		// No runtime lock: the cell was registered at admission (a warm
		// request takes the lock three times: admit, nothing here, release).
		// The cell points into the lease, not at req: taking req's address
		// would move every call's Request to the heap.
		l.reqID = req.ID
		l.id.v.Store(&l.reqID)
	}
	return l.r.runInfer(ctx, l.model, &l.g, req, emit)
}

// Release ends the lease; failed records that the request failed. Only the
// first call releases; it reports whether this call did.
func (l *Lease) Release(failed bool) bool {
	if !l.released.CompareAndSwap(false, true) {
		return false
	}
	l.r.release(l.g.tk, failed)
	return true
}

// acquire submits a request and waits for its Grant (submitAndWait). The
// hot path (a warm model with a spare slot and nothing queued) is one
// critical section with no channel and no allocation. reqID, when set, is
// remembered for Busy.
func (r *Runtime) acquire(ctx context.Context, id string, timeout int64, reqID string, cell *idCell) (grant, string, error) {
	for try := 1; ; try++ {
		ev := core.Event{Kind: core.EvSubmitRequest, Model: id, Timeout: timeout}
		tk, o, err := r.submitAndWait(ctx, id, kindRequest, &ev, reqID, cell)
		if err != nil {
			return grant{}, "", err
		}
		if o.kind != core.EfGrant {
			return grant{}, "", refused(id, o)
		}
		// ev.Model is the ID the name resolved to in the submission (names.go).
		g := grant{tk: tk, slot: o.slot, version: o.version, sess: o.session, task: o.task, engine: o.engine}
		if ev.Model == id || r.stillNames(ev.Model, id) {
			return g, ev.Model, nil
		}
		// The alias was taken off the model by a PUT the request queued
		// behind: it runs where the name leads now (CONTRACT.md
		// names.alias-resolve).
		r.release(g.tk, false)
		if try == maxAliasTries {
			return grant{}, "", &Error{Code: core.CodeServerBusy, Msg: fmt.Sprintf("model %q: the alias moved %d times while the request waited", id, try)}
		}
	}
}

// maxAliasTries bounds how many times a request whose alias moved while
// it queued is submitted again.
const maxAliasTries = 3

// stillNames reports whether the granted model's committed config still
// has alias name: while the lease is held no manager runs on the model,
// so that config is the lease's.
func (r *Runtime) stillNames(model, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.aliasOfLocked(model, name)
	return ok
}

// release ends the lease of tk as one critical section.
func (r *Runtime) release(tk core.Ticket, failed bool) {
	t := r.clock()
	r.mu.Lock() // lockAt, spelled out: this path is hot
	now := r.stampLocked(t)
	xs := r.expireDueLocked(now) // an overdue queued ticket expires before this release could grant it
	r.forgetReqIDLocked(tk)
	ev := core.Event{Kind: core.EvRelease, Now: now, Ticket: tk, Failed: failed}
	if err := r.m.Release(ev.Now, ev.Ticket, ev.Failed); err != nil {
		r.mu.Unlock()
		r.execExpired(xs)
		// A lease is released exactly once by construction; this is a bug.
		panic(fmt.Sprintf("runtime: release of ticket %d: %v", uint64(tk), err))
	}
	if !r.obs && len(r.m.Effects()) == 0 { // nothing to route or observe
		r.endLocked(now, &ev, 0)
		r.mu.Unlock()
		r.execExpired(xs)
		return
	}
	var s sect
	r.afterLocked(now, &s, &ev, 0, nil)
	r.mu.Unlock()
	r.execExpired(xs)
	r.exec(&s)
}

// emitState remembers whether a stream's emit callback failed, which means
// the client went away rather than the engine failing.
type emitState struct {
	user backends.Emit
	err  error
}

func (es *emitState) emit(chunk json.RawMessage) error {
	err := es.user(chunk)
	if err != nil && es.err == nil {
		es.err = err
	}
	return err
}

// runInfer calls the engine on the granted session. The call's context ends
// when ctx does or when Shutdown's deadline cancels backend work. Panics in
// the engine (or in emit) are recovered into CodeBackend errors.
func (r *Runtime) runInfer(ctx context.Context, id string, g *grant, req backends.Request, emit backends.Emit) (backends.Output, error) {
	req.Slot, req.Version = g.slot, g.version
	var rctx context.Context = r.workCtx
	// Not ctx.Done() != nil: asking a cancelCtx for Done makes its channel,
	// which an HTTP request's context otherwise never needs (an allocation
	// and a close per request, make bench-http). Only the two contexts
	// that are never done and carry nothing take the shortcut.
	if ctx != context.Background() && ctx != context.TODO() {
		ic := newInferCtx(ctx, r.workCtx)
		defer ic.release()
		rctx = ic
	}
	var es *emitState // only streams pay for it
	if emit != nil {
		es = &emitState{user: emit}
		emit = es.emit
	}
	var out backends.Output
	err := protect(r.log, "infer", func() error {
		var err error
		out, err = g.sess.Infer(rctx, req, emit)
		return err
	})
	if err == nil {
		return out, nil
	}
	switch {
	case isPanic(err):
		return backends.Output{}, err
	case es != nil && es.err != nil:
		return backends.Output{}, &Error{Code: core.CodeCancelled, Msg: fmt.Sprintf("model %q: stream write failed", id), Err: err}
	case ctx.Err() != nil:
		return backends.Output{}, &Error{Code: core.CodeCancelled, Msg: fmt.Sprintf("model %q: caller went away", id), Err: err}
	case r.workCtx.Err() != nil:
		return backends.Output{}, &Error{Code: core.CodeShuttingDown, Msg: fmt.Sprintf("model %q: inference cancelled by shutdown", id), Err: err}
	case errors.Is(err, backends.ErrInvalid):
		return backends.Output{}, &Error{Code: core.CodeInvalid, Msg: fmt.Sprintf("model %q", id), Err: err} // the cause says what is invalid
	}
	return backends.Output{}, &Error{Code: core.CodeBackend, Msg: fmt.Sprintf("model %q: inference failed", id), Err: err}
}
