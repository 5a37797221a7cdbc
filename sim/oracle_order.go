package sim

// oldestWaiting returns the submission order of model md's oldest request
// still waiting, or 0.
func (o *oracle) oldestWaiting(md *omodel) uint64 {
	for md.wqHead < len(md.wq) {
		e := md.wq[md.wqHead]
		if t := &o.t[uint32(e.id)]; t.id == e.id && t.st == tsWaiting {
			return e.seq
		}
		md.wqHead++
		if md.wqHead > 1024 && 2*md.wqHead > len(md.wq) {
			md.wq = append(md.wq[:0], md.wq[md.wqHead:]...)
			md.wqHead = 0
		}
	}
	md.wq, md.wqHead = md.wq[:0], 0
	return 0
}

// checkOrder checks the FIFO contract from the side of the clients after
// an event granted requests (CONTRACT.md order.request-then-request, order.manager-then-request): no request was
// granted while an older request of its model still waits, or while a
// targeted manager submitted before it has not ended.
func (o *oracle) checkOrder(now int64) {
	for k, r := range o.grants {
		h := o.grantsH[k]
		md := &o.md[h]
		if old := o.oldestWaiting(md); old != 0 && old < r.seq {
			o.failf("fifo", now, "%s: request %s granted while an older request (#%d) still waits", o.m.ID(h), tname(r.id), old)
			return
		}
		for _, g := range md.mgrs {
			if g.seq < r.seq {
				o.failf("barge", now, "%s: request %s granted before the earlier manager %s ended", o.m.ID(h), tname(r.id), tname(g.id))
				return
			}
		}
	}
}

// managerDone checks that a targeted manager finished only after every
// older request of its model ended (CONTRACT.md order.request-then-manager: a manager
// waits for all older admitted and queued requests).
func (o *oracle) managerDone(now int64, t *tinfo) {
	md := o.model(t.h)
	if old := o.oldestWaiting(md); old != 0 && old < t.seq {
		o.failf("manager-overtook", now, "%s: manager %s (%s) finished while older request #%d waits", o.m.ID(t.h), tname(t.id), t.op, old)
	}
	for _, tk := range md.slotOwner {
		if tk != 0 && o.t[uint32(tk)].seq < t.seq {
			o.failf("manager-overtook", now, "%s: manager %s (%s) finished while older request %s holds a slot", o.m.ID(t.h), tname(t.id), t.op, tname(tk))
		}
	}
}
