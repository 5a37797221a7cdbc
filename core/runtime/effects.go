package runtime

import (
	"fmt"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// outcome is what a waiter learns about its ticket: a Grant (with the
// session to run on), a Reject or a Done (with the model's status at that
// instant, or a bulk result).
type outcome struct {
	kind    core.EffectKind
	code    core.Code
	slot    int
	version uint64
	session backends.Session
	status  *core.ModelStatus // a Done's status when the manager finished (core never mutates it); nil otherwise
	bulk    *core.BulkResult
	cause   error // why a Reject happened, when a backend step said so
	// retryAfter is a backoff Reject's remaining backoff (core's
	// Effect.RetryAfter, nanoseconds).
	retryAfter int64
	committed  bool   // a manager's Done or Reject: it committed a config version (core.Effect.Committed)
	task       string // a Grant: the task of the granted pool's config
	engine     string // a Grant: the engine of the granted pool's config
}

// waiter is one caller waiting for its ticket. The outcome is written into
// out under the lock and then signalled on ch (buffered 1, signalled at most
// once), after the lock is released; ch carries no data, so it stays small.
// Waiters are pooled: one goes back to the pool only when nothing can still
// signal it (it received its outcome, or it left the waiter table under the
// lock before any outcome was routed to it).
type waiter struct {
	ch    chan struct{}
	out   outcome
	kind  ticketKind // what the ticket is, for the admission counters
	since int64      // submission time of the ticket
}

// newWaiter takes a waiter from the runtime's pool (per runtime, so that a
// waiter's channel never crosses a synctest bubble).
func (r *Runtime) newWaiter() *waiter {
	if w, ok := r.waiterPool.Get().(*waiter); ok {
		return w
	}
	return &waiter{ch: make(chan struct{}, 1)}
}

func (r *Runtime) freeWaiter(w *waiter) {
	w.out, w.kind, w.since = outcome{}, 0, 0
	r.waiterPool.Put(w)
}

// wait blocks until the waiter's outcome arrives.
func (w *waiter) wait() outcome {
	<-w.ch
	return w.out
}

type waitEntry struct {
	tk core.Ticket
	w  *waiter
}

type actKind uint8

const (
	actLoad actKind = iota + 1
	actClone
	actProbe
	actTeardown
	actRelease
	actComplete
)

// action is one thing to do after the lock is released besides signalling
// waiters: start a backend step on a goroutine the runtime owns, release an
// orphaned grant, or report the end of shutdown.
type action struct {
	kind  actKind
	tk    core.Ticket
	h     core.Handle
	job   core.Job
	spec  backends.Spec
	eng   backends.Engine
	index int
	sess  backends.Session   // clone: the primary
	pool  []backends.Session // teardown: the sessions to destroy
}

// sect collects what one critical section leaves to do after unlocking. The
// caller's own ticket is answered inline instead of through a channel; the
// first waiter to signal needs no slice (the common handoff allocates
// nothing).
type sect struct {
	own      core.Ticket
	ownOut   outcome
	hasOwn   bool
	ownKind  ticketKind // what own is, for the admission counters
	ownSince int64      // own's submission time (0: now, it was submitted in this section)
	now      int64      // the section's event time
	send1    *waiter
	sends    []*waiter
	acts     []action
}

// afterLocked finishes a critical section whose one core event has been
// applied: it records the event and its effects (trace, subscribers), turns
// each effect into an outcome or a backend step, clears the machine's effect
// buffer and re-arms the idle timer. cause explains backend Rejects.
func (r *Runtime) afterLocked(now int64, s *sect, ev *core.Event, tk core.Ticket, cause error) {
	effs := r.m.Effects()
	s.now = now
	if r.obs || r.obsLife {
		r.observeLocked(ev, tk, effs)
	}
	for i := range effs {
		r.routeLocked(s, &effs[i], cause)
	}
	r.endLocked(now, ev, tk)
}

// endLocked is the bookkeeping every critical section ends with, also the
// fast paths that have no effect to route: the invariant check (tests: every
// event; production: live, sampled), clearing the machine's effects, and the
// idle and backoff timers. tk is the ticket a submission got.
func (r *Runtime) endLocked(now int64, ev *core.Event, tk core.Ticket) {
	if r.checkInv {
		r.checkLocked(ev)
	} else if l := &r.live; l.every > 0 {
		l.note(ev, tk) // inlined: a few stores and a compare an event
		if l.hot++; l.hot >= l.due {
			r.liveLocked(ev)
		}
	}
	r.m.Advance()
	r.armTickLocked(now)
	if ev.Kind == core.EvLoadDone || ev.Kind == core.EvCloneDone {
		r.armBackoffLocked(now) // a failed load may have started a backoff
	}
}

func (r *Runtime) checkLocked(ev *core.Event) {
	if err := r.m.CheckInvariants(); err != nil {
		panic(fmt.Sprintf("runtime: core invariant broken after %s: %v\n%s", ev.Kind, err, r.m.Describe()))
	}
}

// routeLocked turns one effect into an outcome for its waiter or a backend
// step. Pools move here, under the lock, so a Grant always names a session
// of the pool the core published.
func (r *Runtime) routeLocked(s *sect, e *core.Effect, cause error) {
	if e.Kind == core.EfGrant || e.Kind == core.EfReject {
		r.countRoutedLocked(s, e)
	}
	if len(r.claims) > 0 && (e.Kind == core.EfDone || e.Kind == core.EfReject) {
		r.dropClaimLocked(e.Ticket) // an Apply ended: its aliases are committed or not (names.go)
	}
	switch e.Kind {
	case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown:
		r.models[e.Model].jobSince = r.last
	}
	switch e.Kind {
	case core.EfGrant:
		pub := r.models[e.Model].published
		if int(e.Slot) >= len(pub) || pub[e.Slot] == nil {
			panic(fmt.Sprintf("runtime: grant of slot %d of %s without a published session (pool of %d)",
				e.Slot, r.m.ID(e.Model), len(pub)))
		}
		r.deliverLocked(s, e.Ticket, outcome{kind: core.EfGrant, slot: int(e.Slot), version: e.Version, session: pub[e.Slot],
			task: r.models[e.Model].task, engine: r.models[e.Model].engine})
	case core.EfReject:
		r.deliverLocked(s, e.Ticket, outcome{kind: core.EfReject, code: e.Code, cause: cause, retryAfter: e.RetryAfter,
			committed: e.Committed})
	case core.EfDone:
		// The status when the manager finished, not after what followed.
		r.deliverLocked(s, e.Ticket, outcome{kind: core.EfDone, bulk: e.Bulk, status: e.Status})
	case core.EfStartLoad:
		eng := r.engines[e.Config.Engine]
		s.acts = append(s.acts, action{kind: actLoad, h: e.Model, job: e.Job, eng: eng,
			spec: backendSpec(r.m.ID(e.Model), e.Version, e.Config)})
	case core.EfStartClone:
		p := &r.models[e.Model]
		s.acts = append(s.acts, action{kind: actClone, h: e.Model, job: e.Job, index: int(e.Index), sess: p.private[0]})
	case core.EfStartProbe:
		eng := r.engines[e.Config.Engine]
		s.acts = append(s.acts, action{kind: actProbe, h: e.Model, job: e.Job, eng: eng,
			spec: backendSpec(r.m.ID(e.Model), 0, e.Config)})
	case core.EfPublish:
		p := &r.models[e.Model]
		if p.published != nil || countSessions(p.private) != int(e.Sessions) {
			r.disagreeLocked("publish", e, countSessions(p.published), countSessions(p.private))
		}
		p.published, p.private = p.private, nil
		cfg := r.m.Config(e.Model) // the config the pool was built from (published in this event)
		p.task, p.engine = cfg.Task, cfg.Engine
	case core.EfRetire:
		p := &r.models[e.Model]
		if p.retiring != nil || countSessions(p.published) != int(e.Sessions) {
			r.disagreeLocked("retire", e, countSessions(p.retiring), countSessions(p.published))
		}
		p.retiring, p.published = p.published, nil
	case core.EfStartTeardown:
		p := &r.models[e.Model]
		var pool []backends.Session
		if e.Cause == core.CauseFailedLoad { // the private sessions of a failed build
			pool, p.private = p.private, nil
		} else { // the pool the Retire before it took out of service
			pool, p.retiring = p.retiring, nil
		}
		if n := countSessions(pool); n != int(e.Sessions) {
			r.disagreeLocked("teardown", e, 0, n)
		}
		s.acts = append(s.acts, action{kind: actTeardown, h: e.Model, job: e.Job, pool: pool})
	case core.EfShutdownComplete:
		s.acts = append(s.acts, action{kind: actComplete})
	}
}

// disagreeLocked reports an effect the shell's pools cannot carry out as
// the core says: a bug in the shell or the core. Under CheckInvariants
// (tests) it panics with the values; in production it is a loud error,
// counted (Disagreements), and the shell goes on with what the core said.
func (r *Runtime) disagreeLocked(what string, e *core.Effect, held, have int) {
	r.disagreements.Add(1)
	msg := fmt.Sprintf("runtime: %s of %s disagrees with the core: core says %d sessions (cause %s), the shell holds %d in the way and has %d",
		what, r.m.ID(e.Model), e.Sessions, e.Cause, held, have)
	if r.checkInv {
		panic(msg + "\n" + r.m.Describe())
	}
	r.log.Error(msg)
}

// Disagreements returns how many effects the shell could not carry out as
// the core said (see Options.CheckInvariants); anything but 0 is a bug.
func (r *Runtime) Disagreements() int64 { return r.disagreements.Load() }

func countSessions(pool []backends.Session) int {
	n := 0
	for _, x := range pool {
		if x != nil {
			n++
		}
	}
	return n
}

// deliverLocked routes an outcome to the caller inside this critical section
// or to the waiter registered for tk. A Grant nobody waits for would leak a
// lease, so it is released (that cannot happen unless the runtime is wrong).
func (r *Runtime) deliverLocked(s *sect, tk core.Ticket, o outcome) {
	if tk == s.own && !s.hasOwn {
		s.ownOut, s.hasOwn = o, true
		return
	}
	w := r.takeWaiterLocked(tk)
	if w == nil {
		if o.kind == core.EfGrant {
			r.log.Error("runtime: grant without a waiter; releasing it", "ticket", uint64(tk))
			s.acts = append(s.acts, action{kind: actRelease, tk: tk})
		}
		return
	}
	w.out = o
	if s.send1 == nil {
		s.send1 = w
	} else {
		s.sends = append(s.sends, w)
	}
}

func (r *Runtime) addWaiterLocked(tk core.Ticket, w *waiter) {
	i := int(uint32(tk))
	for len(r.waiters) <= i {
		r.waiters = append(r.waiters, waitEntry{})
	}
	r.waiters[i] = waitEntry{tk: tk, w: w}
}

func (r *Runtime) takeWaiterLocked(tk core.Ticket) *waiter {
	i := int(uint32(tk))
	if i >= len(r.waiters) || r.waiters[i].tk != tk {
		return nil
	}
	w := r.waiters[i].w
	r.waiters[i] = waitEntry{}
	return w
}

// exec carries out a critical section's actions after the lock is released:
// outcomes go to their waiters' channels, backend steps start on goroutines
// joined by Shutdown, and the trace is flushed.
func (r *Runtime) exec(s *sect) {
	if s.send1 != nil {
		signal(s.send1)
		for _, w := range s.sends {
			signal(w)
		}
	}
	for i := range s.acts {
		a := &s.acts[i]
		switch a.kind {
		case actLoad:
			r.wg.Add(1)
			go r.runLoad(*a)
		case actClone:
			r.wg.Add(1)
			go r.runClone(*a)
		case actProbe:
			r.wg.Add(1)
			go r.runProbe(*a)
		case actTeardown:
			r.wg.Add(1)
			go r.runTeardown(*a)
		case actRelease:
			r.release(a.tk, true)
		case actComplete:
			close(r.complete)
		}
	}
	if r.trace != nil {
		r.flushTrace()
	}
}

func signal(w *waiter) {
	select {
	case w.ch <- struct{}{}:
	default:
		panic("runtime: a waiter was signalled twice")
	}
}
