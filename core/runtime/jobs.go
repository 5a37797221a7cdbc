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
	ev := core.Event{Kind: core.EvLoadDone, Job: a.job, Capacity: capacity, Failed: err != nil}
	r.complete1(a, cause, ev, func() {
		if sess != nil {
			p := &r.models[a.h]
			p.private = make([]backends.Session, a.spec.Slots)
			p.private[0] = sess
		}
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
	ev := core.Event{Kind: core.EvCloneDone, Job: a.job, Failed: err != nil}
	r.complete1(a, err, ev, func() {
		if sess != nil {
			r.models[a.h].private[a.index] = sess
		}
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
	r.complete1(a, cause, core.Event{Kind: core.EvProbeDone, Job: a.job, Capacity: capacity, Failed: err != nil}, nil, nil, nil)
}

func (r *Runtime) runTeardown(a action) {
	defer r.wg.Done()
	r.closeAll(a.pool, "")
	r.complete1(a, nil, core.Event{Kind: core.EvTeardownDone, Job: a.job}, nil, nil, nil)
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

// complete1 reports a finished backend step as one critical section: store
// keeps what the step produced (the sessions it opened), then ev, stamped
// with the section's time, is stepped, and the same value is observed. When
// the core publishes the private pool, its Publish effect makes it the
// published one before any Grant is routed. If the core refuses the event
// (a runtime bug), undo removes what store kept and orphan is destroyed.
func (r *Runtime) complete1(a action, cause error, ev core.Event, store, undo func(), orphan []backends.Session) {
	var xs *sect
	ev.Now, xs = r.lockAt(r.clock()) // overdue tickets expire before the step can grant them
	if store != nil {
		store()
	}
	if _, err := r.m.Step(ev); err != nil {
		if undo != nil {
			undo()
		}
		r.disagreements.Add(1)
		if r.checkInv {
			defer r.mu.Unlock()
			panic(fmt.Sprintf("runtime: core refused %s of job %d: %v\n%s", ev.Kind, uint64(a.job), err, r.m.Describe()))
		}
		r.mu.Unlock()
		r.execExpired(xs)
		r.log.Error("runtime: core refused a backend completion", "job", uint64(a.job), "err", err)
		r.closeAll(orphan, "")
		return
	}
	var s sect
	r.afterLocked(ev.Now, &s, &ev, 0, cause)
	r.mu.Unlock()
	r.execExpired(xs)
	r.exec(&s)
}
