package abstract

import "github.com/sluice-dev/sluice/core"

// The actions of time and of the process: Tick (admission deadlines, load
// backoffs, idle retirement) and BeginShutdown.

// Tick: time passed. Any queued ticket past its deadline may be rejected
// server_busy, any load backoff may end, and any ready model idle and
// queue-free long enough may retire (CONTRACT res.idle-retirement,
// fail.load-backoff). Which ones is a matter of
// time, so every choice is an outcome.
func (r *run) Tick() []*run {
	type ref struct{ model, idx int }
	var exp []ref
	for i := range r.s.Models {
		for k, e := range r.s.Models[i].Queue {
			if e.Kind != KMember && (e.Bounded || r.p.Loose) {
				exp = append(exp, ref{i, k})
			}
		}
	}
	var idle []int
	if (r.p.IdleRetire || r.p.Loose) && !r.s.Shutdown {
		for i := range r.s.Models {
			if r.evictable(i) {
				idle = append(idle, i)
			}
		}
	}
	n := len(exp) + len(idle)
	if n > 12 {
		n = 12 // keep the choice finite and small; larger ticks are validated by their effects one by one
	}
	var runs []*run
	for mask := 0; mask < 1<<n; mask++ {
		var expire []uint64
		var retire []string
		for b := 0; b < n; b++ {
			if mask&(1<<b) == 0 {
				continue
			}
			if b < len(exp) {
				x := exp[b]
				expire = append(expire, r.s.Models[x.model].Queue[x.idx].ID)
			} else {
				retire = append(retire, r.s.Models[idle[b-len(exp)]].ID)
			}
		}
		runs = append(runs, r.fork().TickGiven(expire, retire)...)
	}
	return runs
}

// TickGiven is Tick with its choice of expired tickets and idle models given
// (trace validation reads it from the logged effects): no outcome when a
// ticket cannot expire or a model cannot retire. Which load backoffs ended
// shows in no effect, so every choice of them is an outcome (CONTRACT
// fail.load-backoff).
func (r *run) TickGiven(expire []uint64, retire []string) []*run {
	var off []int
	for i := range r.s.Models {
		if r.s.Models[i].Backoff {
			off = append(off, i)
		}
	}
	var runs []*run
	for mask := 0; mask < 1<<len(off); mask++ {
		f := r
		if mask < 1<<len(off)-1 {
			f = r.fork()
		}
		for b, i := range off {
			if mask&(1<<b) != 0 {
				f.s.Models[i].Backoff = false
			}
		}
		runs = append(runs, f.tickGiven(expire, retire)...)
	}
	return runs
}

func (r *run) tickGiven(expire []uint64, retire []string) []*run {
	for _, id := range expire {
		where, i, k := r.s.FindTicket(id)
		if where != PlaceQueued {
			return nil
		}
		md := &r.s.Models[i]
		if e := md.Queue[k]; !e.Bounded && !r.p.Loose {
			return nil
		}
		md.Queue = remove(md.Queue, k)
		r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeServerBusy, Model: i})
	}
	for _, id := range retire {
		i := r.s.Lookup(id)
		if i < 0 || !(r.p.IdleRetire || r.p.Loose) || r.s.Shutdown || !r.evictable(i) {
			return nil
		}
		r.retire(i, core.CauseIdle)
	}
	return []*run{r}
}

// BeginShutdown: stop admitting. Every queued ticket is rejected
// shutting_down; admitted requests, granted managers and their loads finish,
// then pools retire and ShutdownComplete follows. Repeating it is a stutter.
func (r *run) BeginShutdown() []*run {
	if r.s.Shutdown {
		return []*run{r}
	}
	r.s.Shutdown = true
	for i := range r.s.Models {
		md := &r.s.Models[i]
		q := md.Queue
		md.Queue = nil
		for _, e := range q {
			if e.Kind == KMember {
				if b := r.s.bulk(e.Bulk); b != nil && b.Reason == 0 {
					b.Reason = ReasonShutdown
				}
				continue
			}
			r.emit(Effect{Kind: core.EfReject, Ticket: e.ID, Code: core.CodeShuttingDown, Model: i})
		}
	}
	for k := len(r.s.Bulks) - 1; k >= 0; k-- {
		r.bulkCheck(r.s.Bulks[k].ID)
	}
	return []*run{r}
}
