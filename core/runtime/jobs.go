package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// panicError is an engine panic recovered by the runtime.
type panicError struct {
	step  string
	value any
}

func (p *panicError) Error() string { return fmt.Sprintf("engine panic in %s: %v", p.step, p.value) }

func isPanic(err error) bool {
	var p *panicError
	return errors.As(err, &p)
}

// protect runs one engine call and turns a panic into a CodeBackend error,
// logged with its stack, so that every lease and job still completes.
func protect(log *slog.Logger, step string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			log.Error("engine panic", "step", step, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = &Error{Code: core.CodeBackend, Msg: "engine panic in " + step, Err: &panicError{step: step, value: v}}
		}
	}()
	return f()
}

// The backend steps. Each runs on its own goroutine, owned by the runtime
// (r.wg, joined by Shutdown), calls the engine without the lock under the
// runtime's work context (cancelled when Shutdown's deadline passes), and
// reports back as exactly one core event.

func (r *Runtime) runLoad(a action) {
	defer r.wg.Done()
	var sess backends.Session
	var capacity int
	err := errors.New("unknown engine " + a.spec.Engine)
	if a.eng != nil {
		err = protect(r.log, "open", func() error {
			var err error
			sess, capacity, err = a.eng.Open(r.workCtx, a.spec)
			return err
		})
	}
	if err != nil && sess != nil {
		r.closeAll([]backends.Session{sess}, a.spec.Model)
		sess = nil
	}
	if err == nil && sess == nil {
		err = errors.New("engine returned no session")
	}
	cause := err
	if err == nil && capacity < a.spec.Slots {
		cause = fmt.Errorf("engine %s advertises capacity %d, model needs %d slots", a.spec.Engine, capacity, a.spec.Slots)
	}
	if err != nil {
		r.log.Warn("load failed", "model", a.spec.Model, "version", a.spec.Version, "err", err)
	}
	r.complete1(a, cause, func(now int64) (core.Event, error) {
		if sess != nil {
			p := &r.models[a.h]
			p.private = make([]backends.Session, a.spec.Slots)
			p.private[0] = sess
		}
		ev := core.Event{Kind: core.EvLoadDone, Now: now, Job: a.job, Capacity: capacity, Failed: err != nil}
		return ev, r.m.LoadDone(now, a.job, capacity, err != nil)
	}, func() {
		if sess != nil {
			r.models[a.h].private = nil
		}
	}, []backends.Session{sess})
}

func (r *Runtime) runClone(a action) {
	defer r.wg.Done()
	var sess backends.Session
	err := protect(r.log, "clone", func() error {
		var err error
		sess, err = a.sess.Clone(r.workCtx, a.index)
		return err
	})
	if err != nil && sess != nil {
		r.closeAll([]backends.Session{sess}, "")
		sess = nil
	}
	if err == nil && sess == nil {
		err = errors.New("engine returned no session")
	}
	if err != nil {
		r.log.Warn("clone failed", "index", a.index, "err", err)
	}
	r.complete1(a, err, func(now int64) (core.Event, error) {
		if sess != nil {
			r.models[a.h].private[a.index] = sess
		}
		ev := core.Event{Kind: core.EvCloneDone, Now: now, Job: a.job, Failed: err != nil}
		return ev, r.m.CloneDone(now, a.job, err != nil)
	}, func() {
		if sess != nil {
			r.models[a.h].private[a.index] = nil
		}
	}, []backends.Session{sess})
}

func (r *Runtime) runProbe(a action) {
	defer r.wg.Done()
	var capacity int
	err := errors.New("unknown engine " + a.spec.Engine)
	if a.eng != nil {
		err = protect(r.log, "probe", func() error {
			var err error
			capacity, err = a.eng.Probe(r.workCtx, a.spec)
			return err
		})
	}
	cause := err
	if err == nil && capacity < a.spec.Slots {
		cause = fmt.Errorf("engine %s advertises capacity %d, model needs %d slots", a.spec.Engine, capacity, a.spec.Slots)
	}
	if err != nil {
		r.log.Warn("probe failed", "model", a.spec.Model, "err", err)
	}
	r.complete1(a, cause, func(now int64) (core.Event, error) {
		ev := core.Event{Kind: core.EvProbeDone, Now: now, Job: a.job, Capacity: capacity, Failed: err != nil}
		return ev, r.m.ProbeDone(now, a.job, capacity, err != nil)
	}, nil, nil)
}

func (r *Runtime) runTeardown(a action) {
	defer r.wg.Done()
	r.closeAll(a.pool, "")
	r.complete1(a, nil, func(now int64) (core.Event, error) {
		ev := core.Event{Kind: core.EvTeardownDone, Now: now, Job: a.job}
		return ev, r.m.TeardownDone(now, a.job)
	}, nil, nil)
}

// closeAll destroys sessions, clones first and the primary last. Errors and
// panics are logged: a session counts as destroyed either way (the engine
// must free it even when its context has ended).
func (r *Runtime) closeAll(pool []backends.Session, model string) {
	for i := len(pool) - 1; i >= 0; i-- {
		s := pool[i]
		if s == nil {
			continue
		}
		if err := protect(r.log, "close", func() error { return s.Close(r.workCtx) }); err != nil {
			r.log.Warn("session close failed", "model", model, "index", i, "err", err)
		}
	}
}

// publishLocked moves model h's private pool to published when the load or
// clone step just applied completed it. The core publishes a pool inside
// that event, before anything else the event does (a queued unload or the
// shutdown may retire the new pool in the same event), so the effects tell:
// a successful step that asked for no further clone and did not tear the
// private pool down published it.
func (r *Runtime) publishLocked(h core.Handle, failed bool) {
	p := &r.models[h]
	if failed || p.private == nil {
		return
	}
	for _, e := range r.m.Effects() {
		if e.Model == h && (e.Kind == core.EfStartClone || e.Kind == core.EfStartTeardown && e.Cause == core.CauseFailedLoad) {
			return
		}
	}
	if p.published != nil {
		panic(fmt.Sprintf("runtime: %s publishes a pool over a published one", r.m.ID(h)))
	}
	p.published, p.private = p.private, nil
}

// complete1 reports a finished backend step as one critical section: apply
// stores what the step produced and applies the core event; when the core
// publishes the private pool, it becomes the published one before any Grant
// is routed. If the core refuses the event (a runtime bug), undo removes
// what apply stored and orphan is destroyed.
func (r *Runtime) complete1(a action, cause error, apply func(now int64) (core.Event, error), undo func(), orphan []backends.Session) {
	t := r.clock()
	r.mu.Lock()
	now := r.stampLocked(t)
	ev, err := apply(now)
	if err != nil {
		if undo != nil {
			undo()
		}
		r.mu.Unlock()
		r.log.Error("runtime: core refused a backend completion", "job", uint64(a.job), "err", err)
		r.closeAll(orphan, "")
		return
	}
	if ev.Kind == core.EvLoadDone || ev.Kind == core.EvCloneDone {
		r.publishLocked(a.h, ev.Failed)
	}
	var s sect
	r.afterLocked(now, &s, &ev, 0, cause)
	r.mu.Unlock()
	r.exec(&s)
}
