package sim

import "github.com/sluice-dev/sluice/core"

// ghost is a model ID that is never registered: its requests and managers
// are answered not_found, and bulk unloads report it in not_found.
const ghost = "ghost"

// arrival plays the clients of one model ID: in a demand phase they send
// requests, sometimes a burst at one instant; in a quiet phase none.
func (w *world) arrival(it *item) {
	if w.stopped {
		return
	}
	i := int(it.a)
	ns, spec := &w.names[i], &w.sc.names[i]
	if w.now >= ns.phaseEnd {
		ns.on = !ns.on
		ns.phaseEnd = w.now + w.r.expo(w.phaseMean(i))
	}
	next := ns.phaseEnd
	if ns.on {
		n := 1
		if w.r.ppm(w.sc.rate.burst) {
			n = 2 + w.r.IntN(24)
		}
		// A model has a bounded population of clients: one that waits for
		// an answer sends nothing else.
		n = min(n, spec.clients-ns.out)
		if !ns.known {
			if _, ns.known = w.m.Lookup(spec.id); !ns.known && w.r.IntN(10) != 0 {
				n = 0 // few clients call a model before it is registered
			}
		}
		for range n {
			id := spec.id
			if w.r.IntN(200) == 0 {
				id = ghost
			}
			w.request(id, int32(i))
			if w.fail != nil {
				return
			}
		}
		next = min(next, w.now+w.r.expo(spec.gap))
		if ns.out >= spec.clients {
			ns.parked = true // every client waits; the next one to finish sends again
			return
		}
	}
	w.q.push(item{at: max(next, w.now+1), kind: evArrival, a: it.a})
}

// request submits one inference request with the client's timeout choice
// and plans its disconnect or client-side timer.
func (w *world) request(id string, name int32) {
	r := w.r
	timeout := core.NoTimeout
	switch x := r.IntN(10); {
	case x < 3:
		timeout = r.logUniform(millis, 2*secs)
	case x == 3:
		timeout = 0 // explicitly unbounded
	}
	w.pending = client{name: name, stream: r.ppm(w.sc.rate.stream)}
	tk, _, _ := w.do(core.Event{Kind: core.EvSubmitRequest, Now: w.now, Model: id, Timeout: timeout}, -1)
	w.st.requests++
	if w.fail != nil || w.o.find(tk) < 0 {
		return
	}
	c := w.clientOf(tk)
	if name >= 0 && id != ghost {
		c.counted = true
		w.names[name].out++
	}
	w.planClient(tk)
}

// planClient schedules what a waiting client and its shell may do on their
// own: the client may go away; the shell's admission timer may fire at the
// ticket's deadline and cancel it (ReasonTimeout), racing core's Tick at the
// same instant.
func (w *world) planClient(tk core.Ticket) {
	r := w.r
	if r.ppm(w.sc.rate.disconnect) {
		w.q.push(item{at: w.now + r.expo(r.logUniform(millis, 500*millis)), kind: evDisconnect, tk: tk})
	}
	if dead := w.o.t[uint32(tk)].dead; dead > 0 && r.ppm(w.sc.rate.shellTimer) {
		w.q.push(item{at: dead, kind: evClientTimeout, tk: tk})
	}
	if r.ppm(w.sc.rate.misuse) { // a completion callback for work that never ran
		w.q.push(item{at: w.now + r.between(0, millis), kind: evEarlyRelease, tk: tk})
	}
}

// manager sends one management operation: register or reconfigure (often
// with a changed slot count or options, sometimes invalid), load, unload,
// unregister (after which a registration of the ID starts it again past
// its last version), or one for an unknown ID.
func (w *world) manager() {
	if w.stopped {
		return
	}
	r := w.r
	w.q.push(item{at: w.now + r.expo(w.sc.mgrGap), kind: evManager})
	if w.mgrsOut >= maxManagers {
		return
	}
	i := r.IntN(len(w.sc.names))
	spec := &w.sc.names[i]
	ev := core.Event{Kind: core.EvSubmitManager, Now: w.now, Model: spec.id, Timeout: core.NoTimeout}
	switch x := r.IntN(42); {
	case x >= 40:
		ev.Op = core.OpUnregister
	case x < 18:
		ev.Op = core.OpApply
		cur := spec.base
		if h, ok := w.m.Lookup(spec.id); ok {
			c := w.m.Config(h)
			cur = &c
		}
		ev.Config = w.sc.variant(r, cur)
	case x < 26:
		ev.Op = core.OpLoad
	case x < 38:
		ev.Op = core.OpUnload
	default:
		ev.Op = core.OpLoad + core.Op(r.IntN(2))
		ev.Model = ghost
	}
	switch x := r.IntN(20); {
	case x < 4:
		ev.Timeout = r.logUniform(millis, 5*secs)
	case x == 4:
		ev.Timeout = 0
	}
	w.pending = client{name: -2}
	tk, _, _ := w.do(ev, -1)
	w.st.managers++
	if w.fail != nil || w.o.find(tk) < 0 {
		return
	}
	w.clientOf(tk).counted = true
	w.mgrsOut++
	w.planClient(tk)
}

// bulk sends a bulk unload of a random selection (with unknown and
// duplicate IDs), sometimes with a second, overlapping one in reverse order
// at the same instant.
func (w *world) bulk() {
	if w.stopped {
		return
	}
	r := w.r
	w.q.push(item{at: w.now + r.expo(w.sc.bulkGap), kind: evBulk})
	if w.bulksOut >= maxBulks {
		return
	}
	var ids []string
	for k := range w.sc.names {
		if r.IntN(3) != 0 {
			ids = append(ids, w.sc.names[k].id)
		}
	}
	r.Shuffle(len(ids), func(a, b int) { ids[a], ids[b] = ids[b], ids[a] })
	if r.IntN(5) == 0 {
		ids = append(ids, ghost)
	}
	if len(ids) > 0 && r.IntN(10) == 0 {
		ids = append(ids, ids[r.IntN(len(ids))])
	}
	w.bulkOne(ids)
	if w.fail == nil && len(ids) > 1 && r.IntN(3) == 0 {
		rev := make([]string, len(ids))
		for k, id := range ids {
			rev[len(ids)-1-k] = id
		}
		w.bulkOne(rev)
	}
}

func (w *world) bulkOne(ids []string) {
	w.pending = client{name: -1}
	tk, _, _ := w.do(core.Event{Kind: core.EvSubmitBulkUnload, Now: w.now, Models: ids}, -1)
	w.st.bulks++
	if w.fail != nil || w.o.find(tk) < 0 {
		return
	}
	w.clientOf(tk).counted = true
	w.bulksOut++
	if w.r.ppm(w.sc.rate.disconnect) {
		w.q.push(item{at: w.now + w.r.expo(50*millis), kind: evDisconnect, tk: tk})
	}
	w.planMisuse(tk)
}

// planMisuse schedules a probe of core's defences against a confused shell.
func (w *world) planMisuse(tk core.Ticket) {
	if w.r.ppm(w.sc.rate.misuse) {
		w.q.push(item{at: w.now + w.r.between(0, millis), kind: evEarlyRelease, tk: tk})
	}
}
