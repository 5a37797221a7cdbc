package coremodel

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// Views returns the machine's picture of every model.
func (d *Driver) Views() []core.ModelView { return d.ViewsInto(nil) }

// ViewsInto is Views in buf's memory (its views' queues and slots too),
// valid until the next call with the same buf.
func (d *Driver) ViewsInto(buf []core.ModelView) []core.ModelView {
	n := d.M.Len()
	if cap(buf) < n {
		buf = append(buf[:cap(buf)], make([]core.ModelView, n-cap(buf))...)
	}
	vs := buf[:n]
	for h := range vs {
		d.M.InspectInto(core.Handle(h), &vs[h])
	}
	return vs
}

// Abstract is the abstraction function: the spec state that the machine's
// state stands for. It reads only the machine's public views and what the
// driver knows as the machine's shell (the configs tickets asked for, the
// bulk a barrier belongs to, whether ShutdownComplete was emitted). Ticket
// numbers carry over; jobs are named by the job running on each model.
func (d *Driver) Abstract(vs []core.ModelView) *abstract.State { return d.AbstractIn(new(AbsBuf), vs) }

// AbsBuf is memory for AbstractIn, reused from call to call.
type AbsBuf struct {
	s       abstract.State
	models  []abstract.Model
	hs      []abstract.Holder
	qs      []abstract.Entry
	loaders []int
	bulks   []abstract.Bulk
}

// AbstractIn is Abstract into buf's memory: the state is valid until the
// next call with buf.
func (d *Driver) AbstractIn(buf *AbsBuf, vs []core.ModelView) *abstract.State {
	buf.s = abstract.State{Shutdown: d.M.ShuttingDown(), ShutdownSent: d.Sent}
	s := &buf.s
	entry := func(v *core.ModelView, t core.TicketView) abstract.Entry {
		e := abstract.Entry{ID: uint64(t.Ticket), Op: t.Op, Bounded: t.Deadline > 0, Seq: t.Seq}
		switch {
		case t.Member:
			e.Kind = abstract.KMember
			e.Bulk = uint64(d.parentOf(t.Ticket, v.ID))
		case t.Kind == "request":
			e.Kind = abstract.KReq
		default:
			e.Kind = abstract.KMgr
		}
		if e.Op == core.OpApply {
			if tk := d.ticket(t.Ticket); tk != nil {
				e.Cfg = d.B.Table.FromCore(tk.Cfg)
			}
		}
		if t.Seq > s.Seq {
			s.Seq = t.Seq
		}
		return e
	}
	buf.models = slices.Grow(buf.models[:0], len(vs))[:len(vs)]
	s.Models = buf.models[:len(vs):len(vs)]
	nh, nq := 0, 0
	for h := range vs {
		nh += len(vs[h].Slots)
		nq += len(vs[h].Queue)
	}
	// One backing array each for holders and queues, sliced without spare
	// capacity (as abstract.State.Clone does).
	buf.hs, buf.qs = slices.Grow(buf.hs[:0], nh), slices.Grow(buf.qs[:0], nq)
	hs, qs := buf.hs, buf.qs
	for h := range vs {
		v := &vs[h]
		md := &s.Models[h]
		job, _ := abstract.ParseJob(v.JobKind)
		step, _ := abstract.ParseStep(v.ManagerStep)
		*md = abstract.Model{ID: v.ID, Life: v.State, Cfg: d.B.Table.FromCore(v.Config), Ver: v.Version,
			Published: v.Published, Sessions: v.Sessions, Capacity: v.Capacity, Step: step, Job: job,
			Resident: v.Resident, ResMB: v.ResidentMB, LastUse: v.LastUsed, Backoff: v.BackoffUntil != 0,
			Gone: v.Unregistered}
		if job != abstract.JNone {
			md.JobID = uint64(v.Job)
		}
		// The abstraction forgets what no longer matters: the version of a
		// pool that is gone, the sessions counted by a build that ended, the
		// cause of a teardown that finished.
		if v.Published {
			md.PoolVer = v.PoolVersion
		}
		if v.Published || job == abstract.JLoad || job == abstract.JClone {
			md.Built = v.Built
		}
		if job == abstract.JTeardown {
			md.Cause = v.Cause
		}
		if step == abstract.SFailTeardown {
			md.FailCode = d.failCodeOf(core.Handle(h))
		}
		for _, t := range v.Slots {
			hs = append(hs, abstract.Holder{ID: uint64(t.Ticket), Wait: t.Phase == "wait_init", Ver: t.Version, Seq: t.Seq})
			if t.Seq > s.Seq {
				s.Seq = t.Seq
			}
		}
		if n := len(v.Slots); n > 0 {
			md.Holders, hs = hs[:n:n], hs[n:]
		}
		for _, t := range v.Queue {
			qs = append(qs, entry(v, t))
		}
		if n := len(v.Queue); n > 0 {
			md.Queue, qs = qs[:n:n], qs[n:]
		}
		if v.Manager != nil {
			md.HasMgr = true
			md.Mgr = entry(v, *v.Manager)
		}
	}
	buf.loaders = buf.loaders[:0]
	for _, h := range d.M.Loaders() {
		buf.loaders = append(buf.loaders, int(h))
	}
	buf.bulks = buf.bulks[:0]
	for _, b := range d.bulks {
		buf.bulks = append(buf.bulks, abstract.Bulk{ID: uint64(b.ID), Reason: b.Reason, Result: b.Result})
	}
	if n := len(buf.loaders); n > 0 {
		s.Loaders = buf.loaders[:n:n]
	}
	if n := len(buf.bulks); n > 0 {
		s.Bulks = buf.bulks[:n:n]
	}
	return s
}

// AbstractEffects maps the machine's effects of the last label to spec
// effects (slots and job numbers are the machine's own business).
func (d *Driver) AbstractEffects() []abstract.Effect { return d.AbstractEffectsInto(nil) }

// AbstractEffectsInto is AbstractEffects appended to buf[:0].
func (d *Driver) AbstractEffectsInto(buf []abstract.Effect) []abstract.Effect {
	out := buf[:0]
	for _, e := range d.Effects {
		if e.Kind.Observation() { // the spec has no Publish or Retire effect
			continue
		}
		a := abstract.Effect{Kind: e.Kind, Ticket: uint64(e.Ticket), Model: int(e.Model), Code: e.Code,
			Ver: e.Version, Cfg: d.B.Table.FromCore(e.Config), Index: int(e.Index), Sessions: int(e.Sessions),
			Cause: e.Cause, Bulk: e.Bulk}
		if e.Kind == core.EfStartProbe {
			a.Ver = e.Version
		}
		out = append(out, a)
	}
	return NormalizeEffects(out)
}

// NormalizeEffects drops what the contract leaves to the implementation:
// the model named by an answer's effect (tickets are named already) and the
// model of a ShutdownComplete.
func NormalizeEffects(effs []abstract.Effect) []abstract.Effect {
	for k := range effs {
		switch effs[k].Kind {
		case core.EfReject, core.EfDone, core.EfShutdownComplete:
			effs[k].Model = 0
		}
	}
	return effs
}

// AppendKey appends the canonical key of the machine's state: everything
// core.Machine.AppendModelKey encodes for each model (lifecycle, config,
// pool, counters, manager step, job, cause, loader and residency flags,
// version and pool version, admitted requests with phase and bound version,
// the granted manager and the queue with op, deadline, config and bulk
// rank), except slot numbers, which only name interchangeable sessions
// (symmetry over slots and clients: admitted requests are a sorted
// multiset); plus what that key leaves out but the future depends on: the
// place in the loader queue, the least-recently-used rank among published
// models (eviction order), the arrival rank of each admitted request among
// the queued tickets (FIFO and barging), then the live bulks' cancellation,
// ShutdownComplete, and the budget left. With class (symmetry), each
// model's key starts with its symmetry class and the models are sorted by
// their keys; without, they stay in registration order.
func (d *Driver) AppendKey(b []byte, vs []core.ModelView, class func(id string) byte) []byte {
	return d.Key(b, vs, class, nil)
}

// Key is AppendKey that also reports, in twins (when not nil, one entry
// per model), which models have an earlier model of the same class with an
// identical key: models in identical situations, so that exchanging them
// leaves the state's canonical key unchanged.
func (d *Driver) Key(b []byte, vs []core.ModelView, class func(id string) byte, twins []bool) []byte {
	loaders := d.M.Loaders()
	// A planted bug may read what core otherwise leaves dead
	// (MutStaleMetadata republishes a stale pool version): with mutants the
	// key keeps it.
	keepDead := d.ExactKey || d.M.Options().Mutants != 0
	bulkRank := func(t core.Ticket, model string) byte {
		p := d.parentOf(t, model)
		for k, bk := range d.bulks {
			if bk.ID == p {
				return byte(k)
			}
		}
		return 0xff
	}
	ticketKey := func(k []byte, v *core.ModelView, t *core.TicketView) []byte {
		cfg := 0
		if tk := d.ticket(t.Ticket); tk != nil && tk.Cfg != nil {
			cfg = d.B.Table.FromCore(tk.Cfg).ID()
		}
		k = append(k, kindByte(t.Kind), byte(t.Op), boolByte(t.Deadline > 0), byte(cfg), boolByte(t.Member))
		if t.Member {
			k = append(k, bulkRank(t.Ticket, v.ID))
		}
		return k
	}
	b = append(b, byte(len(vs)), boolByte(d.M.ShuttingDown()), boolByte(d.Sent), byte(len(d.bulks)))
	for _, bk := range d.bulks {
		b = append(b, byte(bk.Reason))
	}
	start := len(b)
	var spanBuf [8][2]int
	spans := spanBuf[:0]
	for h := range vs {
		v := &vs[h]
		at := len(b)
		k := append(b, 0, 0) // the model key's length, filled in below
		if class != nil {
			k = append(k, class(v.ID))
		}
		job, _ := abstract.ParseJob(v.JobKind)
		step, _ := abstract.ParseStep(v.ManagerStep)
		fail := byte(0)
		if step == abstract.SFailTeardown {
			fail = byte(d.failCodeOf(core.Handle(h)))
		}
		k = append(k, byte(v.State), byte(d.B.Table.FromCore(v.Config).ID()), boolByte(v.Published), byte(v.Capacity),
			byte(v.Sessions), byte(v.Built), byte(v.Active), byte(v.WaitInit), byte(step), fail, byte(job), byte(v.Cause),
			boolByte(v.InLoaders), boolByte(v.Resident), boolByte(v.BackoffUntil != 0), boolByte(v.Unregistered))
		k = binary.AppendUvarint(k, v.Version)
		lag := v.Version - v.PoolVersion
		if !v.Published && !keepDead {
			// Dead in core: without a published pool, the pool version is
			// overwritten (publish, commit) before anything reads it
			// (grants and retire read it of a published pool only).
			lag = 0
		}
		k = binary.AppendUvarint(k, lag)
		k = binary.AppendUvarint(k, uint64(v.ResidentMB))
		lpos := byte(0xff)
		for p, x := range loaders {
			if int(x) == h {
				lpos = byte(p)
			}
		}
		lru := byte(0xff) // eviction order among published pools, the only victims
		if v.Published {
			lru = 0
			for x := range vs {
				if vs[x].Published && vs[x].LastUsed < v.LastUsed {
					lru++
				}
			}
		}
		k = append(k, lpos, lru)
		// Admitted requests as a sorted multiset: slot numbers only name
		// interchangeable sessions.
		var slotBuf [core.MaxSlots][slotKeyLen]byte
		slots := slotBuf[:len(v.Slots)]
		for n, t := range v.Slots {
			rank := byte(0)
			for _, q := range v.Queue {
				if q.Seq < t.Seq {
					rank++
				}
			}
			x := &slots[n]
			x[0], x[1], x[2] = 's', phaseByte(t.Phase), rank
			binary.PutUvarint(x[3:], v.Version-t.Version)
		}
		slices.SortFunc(slots, func(x, y [slotKeyLen]byte) int { return bytes.Compare(x[:], y[:]) })
		for n := range slots {
			k = append(k, slots[n][:]...)
		}
		if v.Manager != nil {
			k = ticketKey(append(k, 'm'), v, v.Manager)
		}
		for n := range v.Queue {
			k = ticketKey(append(k, 'q'), v, &v.Queue[n])
		}
		binary.BigEndian.PutUint16(k[at:], uint16(len(k)-at-2))
		b = k
		spans = append(spans, [2]int{at, len(b)})
	}
	for h := range twins {
		twins[h] = false
		for x := 0; x < h && class != nil; x++ {
			if bytes.Equal(b[spans[x][0]:spans[x][1]], b[spans[h][0]:spans[h][1]]) {
				twins[h] = true
				break
			}
		}
	}
	if class != nil && len(spans) > 1 {
		b = abstract.SortSpans(b, start, spans)
	}
	return d.Budget.AppendKey(b)
}

// slotKeyLen is the width of one admitted request's key: 's', phase, rank,
// and the versions it lags behind as a zero-padded uvarint.
const slotKeyLen = 3 + binary.MaxVarintLen64

func kindByte(k string) byte {
	switch k {
	case "request":
		return 1
	case "manager":
		return 2
	}
	return 3
}

func phaseByte(p string) byte {
	if p == "wait_init" {
		return 1
	}
	return 2
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
