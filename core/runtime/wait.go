package runtime

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// ticketKind says what a waiter waits for; it decides what happens when its
// caller goes away.
type ticketKind uint8

const (
	kindRequest ticketKind = iota + 1
	kindManager
	kindBulk
)

// submitAndWait is the one submission path of requests, managers and bulk
// unloads: ev (without its time) is stamped, stepped and observed as one
// critical section, and the caller then waits for its ticket's outcome
// (await) unless the section answered it already. A request granted at
// once on a warm model (core's hot path) takes no waiter, no channel and
// no allocation: its Grant is the only effect and no observer wants it.
func (r *Runtime) submitAndWait(ctx context.Context, id string, kind ticketKind, ev *core.Event, reqID string, cell *idCell) (core.Ticket, outcome, error) {
	if ctx.Err() != nil {
		return 0, outcome{}, cancelled(ctx, id)
	}
	t := r.clock()
	r.mu.Lock() // lockAt, spelled out: this path is hot
	now := r.stampLocked(t)
	xs := r.expireDueLocked(now) // overdue tickets expire first (deadlines.go)
	ev.Now = now
	var tk core.Ticket
	var h core.Handle
	known := false
	if ev.Kind == core.EvSubmitRequest { // the name resolves here, in the request's own submission (names.go)
		h, ev.Model, known = r.resolveName(ev.Model)
	}
	if known {
		tk = r.m.SubmitRequest(now, h, ev.Timeout)
		r.noteReqIDLocked(tk, reqID, cell)
		if effs := r.m.Effects(); !r.obs && len(effs) == 1 && effs[0].Kind == core.EfGrant && effs[0].Ticket == tk {
			e := &effs[0]
			o := outcome{kind: core.EfGrant, slot: int(e.Slot), version: e.Version, session: r.models[h].published[e.Slot],
				task: r.models[h].task, engine: r.models[h].engine}
			r.models[h].stats.admit(0, r.waitBounds)
			r.endLocked(now, ev, tk)
			r.mu.Unlock()
			r.execExpired(xs)
			return tk, o, nil
		}
	} else {
		if err := r.capLocked(ev); err != nil {
			r.mu.Unlock()
			r.execExpired(xs)
			return 0, outcome{}, err
		}
		if err := r.namesLocked(ev); err != nil {
			r.mu.Unlock()
			r.execExpired(xs)
			return 0, outcome{}, err
		}
		// Unknown IDs go through the core too, so a trace replays exactly.
		tk, _ = r.m.Step(*ev)
		r.growLocked()
		r.claimLocked(ev, tk)
	}
	s := sect{own: tk, ownKind: kind}
	r.afterLocked(now, &s, ev, tk, nil)
	var w *waiter
	var d int64
	if !s.hasOwn {
		w = r.newWaiter()
		w.kind, w.since = kind, now
		r.addWaiterLocked(tk, w)
		if dl := r.m.Deadline(tk); dl > 0 { // the core's own deadline; 0: unbounded or already admitted
			d = dl - now
			r.pushDeadlineLocked(tk, dl)
		}
	}
	r.mu.Unlock()
	r.execExpired(xs)
	switch kind { // live sessions drain for a waiting manager (managers.go)
	case kindManager:
		r.noteManagers(ev.Model)
	case kindBulk:
		r.noteManagers(ev.Models...)
	}
	r.exec(&s)
	if s.hasOwn {
		return tk, s.ownOut, nil
	}
	o, err := r.await(ctx, id, tk, w, d, kind)
	return tk, o, err
}

// await waits for the outcome of ticket tk on its waiter w, ctx and an admission
// timer of d nanoseconds (0: none), the deadline the core keeps in the
// ticket (CONTRACT.md, "Timeout, disconnect and shutdown"):
//
//	(1) the outcome arrives: return it.
//	(2) the admission timer fires: Cancel(timeout). A queued ticket ends
//	    with server_busy; an admitted one is not cancellable, so keep
//	    waiting without the timer. The runtime's own deadlines
//	    (deadlines.go) have usually expired a queued ticket first, in the
//	    same or an earlier section: then this Cancel finds it ended.
//	(3) ctx ends (the client went away): Cancel(disconnect). A queued or
//	    initialising request leaves at once; a granted request's lease is
//	    released as soon as its Grant arrives; a granted manager runs on
//	    and the caller leaves; a bulk withdraws its queued barriers.
//
// A Cancel that finds the ticket already ended means its outcome is on the
// way to w: wait for it.
//
// await returns w to the pool: the caller must not use it afterwards.
func (r *Runtime) await(ctx context.Context, id string, tk core.Ticket, w *waiter, d int64, kind ticketKind) (outcome, error) {
	defer r.freeWaiter(w)
	if d == 0 && ctx.Done() == nil { // nothing but the outcome can end the wait
		return w.wait(), nil
	}
	var timerC <-chan time.Time
	if d > 0 {
		t := time.NewTimer(time.Duration(d) + r.timerLag)
		defer t.Stop()
		timerC = t.C
	}
	for {
		select {
		case <-w.ch: // (1)
			return w.out, nil
		case <-timerC: // (2)
			timerC = nil
			o, own, _, err := r.cancel(tk, core.ReasonTimeout, false, kind)
			if err != nil {
				return w.wait(), nil
			}
			if own {
				return o, nil
			}
		case <-ctx.Done(): // (3)
			o, own, ok, err := r.cancel(tk, core.ReasonDisconnect, kind != kindRequest, kind)
			switch {
			case err != nil:
				o = w.wait()
				if kind == kindRequest && o.kind == core.EfGrant {
					r.release(tk, false)
					return outcome{}, cancelled(ctx, id)
				}
				return o, nil
			case own && o.kind == core.EfReject && o.code == core.CodeCancelled:
				return outcome{}, cancelled(ctx, id)
			case own:
				return o, nil
			case ok || kind != kindRequest:
				return outcome{}, cancelled(ctx, id)
			}
			// A granted request: its Grant is on the way; take it and
			// release the lease at once.
			if o := w.wait(); o.kind == core.EfGrant {
				r.release(tk, false)
			}
			return outcome{}, cancelled(ctx, id)
		}
	}
}

// cancel applies Cancel(tk, reason) as one critical section. own reports
// that the ticket's terminal outcome came out of this very event (then o is
// it); ok is the core's answer; err means the ticket had already ended.
// leave deregisters the waiter even when the ticket lives on (a granted
// manager or a bulk whose caller went away).
func (r *Runtime) cancel(tk core.Ticket, reason core.Reason, leave bool, kind ticketKind) (o outcome, own, ok bool, err error) {
	t := r.clock()
	r.mu.Lock() // lockAt, spelled out: this path is hot
	now := r.stampLocked(t)
	xs := r.expireDueLocked(now) // may expire tk itself: then Cancel finds it ended
	ev := core.Event{Kind: core.EvCancel, Now: now, Ticket: tk, Reason: reason}
	ok, err = r.m.Cancel(ev.Now, ev.Ticket, ev.Reason) // Step drops ok
	if err != nil {
		r.mu.Unlock()
		r.execExpired(xs)
		return outcome{}, false, false, err
	}
	s := sect{own: tk, ownKind: kind}
	if i := int(uint32(tk)); i < len(r.waiters) && r.waiters[i].tk == tk {
		s.ownSince = r.waiters[i].w.since
	}
	r.afterLocked(now, &s, &ev, 0, nil)
	if s.hasOwn || leave {
		r.takeWaiterLocked(tk)
	}
	r.mu.Unlock()
	r.execExpired(xs)
	r.exec(&s)
	return s.ownOut, s.hasOwn, ok, nil
}
