package coremodel

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// Views returns the machine's picture of every model.
func (d *Driver) Views() []core.ModelView {
	vs := make([]core.ModelView, d.M.Len())
	for h := range vs {
		vs[h] = d.M.Inspect(core.Handle(h))
	}
	return vs
}

// Abstract is the abstraction function: the spec state that the machine's
// state stands for. It reads only the machine's public views and what the
// driver knows as the machine's shell (the configs tickets asked for, the
// bulk a barrier belongs to, whether ShutdownComplete was emitted). Ticket
// numbers carry over; jobs are named by the job running on each model.
func (d *Driver) Abstract(vs []core.ModelView) *abstract.State {
	s := &abstract.State{Shutdown: d.M.ShuttingDown(), ShutdownSent: d.Sent}
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
			if tk := d.tickets[t.Ticket]; tk != nil {
				e.Cfg = abstract.FromCore(tk.Cfg)
			}
		}
		if t.Seq > s.Seq {
			s.Seq = t.Seq
		}
		return e
	}
	s.Models = make([]abstract.Model, len(vs))
	for h := range vs {
		v := &vs[h]
		md := &s.Models[h]
		job, _ := abstract.ParseJob(v.JobKind)
		step, _ := abstract.ParseStep(v.ManagerStep)
		*md = abstract.Model{ID: v.ID, Life: v.State, Cfg: abstract.FromCore(v.Config), Ver: v.Version,
			Published: v.Published, Sessions: v.Sessions, Capacity: v.Capacity, Step: step, Job: job,
			Resident: v.Resident, ResMB: v.ResidentMB, LastUse: v.LastUsed}
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
			md.FailCode = d.failCode[core.Handle(h)]
		}
		for _, t := range v.Slots {
			md.Holders = append(md.Holders, abstract.Holder{ID: uint64(t.Ticket), Wait: t.Phase == "wait_init",
				Ver: t.Version, Seq: t.Seq})
			if t.Seq > s.Seq {
				s.Seq = t.Seq
			}
		}
		for _, t := range v.Queue {
			md.Queue = append(md.Queue, entry(v, t))
		}
		if v.Manager != nil {
			md.HasMgr = true
			md.Mgr = entry(v, *v.Manager)
		}
	}
	for _, h := range d.M.Loaders() {
		s.Loaders = append(s.Loaders, int(h))
	}
	for _, b := range d.bulks {
		s.Bulks = append(s.Bulks, abstract.Bulk{ID: uint64(b.ID), Reason: b.Reason, Result: b.Result})
	}
	return s
}

// AbstractEffects maps the machine's effects of the last label to spec
// effects (slots and job numbers are the machine's own business).
func (d *Driver) AbstractEffects() []abstract.Effect {
	out := make([]abstract.Effect, 0, len(d.Effects))
	for _, e := range d.Effects {
		a := abstract.Effect{Kind: e.Kind, Ticket: uint64(e.Ticket), Model: int(e.Model), Code: e.Code,
			Ver: e.Version, Cfg: abstract.FromCore(e.Config), Index: int(e.Index), Sessions: int(e.Sessions),
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
// ShutdownComplete, and the budget left. With symmetry the models are
// sorted by their keys.
func (d *Driver) AppendKey(b []byte, vs []core.ModelView, sym bool) []byte {
	loaders := d.M.Loaders()
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
		if tk := d.tickets[t.Ticket]; tk != nil && tk.Cfg != nil {
			cfg = abstract.FromCore(tk.Cfg).ID()
		}
		k = append(k, kindByte(t.Kind), byte(t.Op), boolByte(t.Deadline > 0), byte(cfg), boolByte(t.Member))
		if t.Member {
			k = append(k, bulkRank(t.Ticket, v.ID))
		}
		return k
	}
	keys := make([][]byte, len(vs))
	for h := range vs {
		v := &vs[h]
		job, _ := abstract.ParseJob(v.JobKind)
		step, _ := abstract.ParseStep(v.ManagerStep)
		fail := byte(0)
		if step == abstract.SFailTeardown {
			fail = byte(d.failCode[core.Handle(h)])
		}
		k := []byte{byte(v.State), byte(abstract.FromCore(v.Config).ID()), boolByte(v.Published), byte(v.Capacity),
			byte(v.Sessions), byte(v.Built), byte(v.Active), byte(v.WaitInit), byte(step), fail, byte(job), byte(v.Cause),
			boolByte(v.InLoaders), boolByte(v.Resident)}
		k = binary.AppendUvarint(k, v.Version)
		k = binary.AppendUvarint(k, v.Version-v.PoolVersion)
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
		slots := make([][]byte, len(v.Slots))
		for n, t := range v.Slots {
			rank := byte(0)
			for _, q := range v.Queue {
				if q.Seq < t.Seq {
					rank++
				}
			}
			slots[n] = binary.AppendUvarint([]byte{'s', phaseByte(t.Phase), rank}, v.Version-t.Version)
		}
		slices.SortFunc(slots, bytes.Compare)
		for _, x := range slots {
			k = append(k, x...)
		}
		if v.Manager != nil {
			k = ticketKey(append(k, 'm'), v, v.Manager)
		}
		for n := range v.Queue {
			k = ticketKey(append(k, 'q'), v, &v.Queue[n])
		}
		keys[h] = k
	}
	if sym {
		slices.SortFunc(keys, bytes.Compare)
	}
	b = append(b, byte(len(vs)), boolByte(d.M.ShuttingDown()), boolByte(d.Sent), byte(len(d.bulks)))
	for _, bk := range d.bulks {
		b = append(b, byte(bk.Reason))
	}
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return d.Budget.AppendKey(b)
}

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
