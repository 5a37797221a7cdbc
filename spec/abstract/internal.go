package abstract

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/core"
)

// The internal actions of the spec run after every event until none is
// enabled; they are never logged in a trace. Pump(m) admits or grants the
// head of m's FIFO; LoaderStep starts, evicts for or refuses the head of the
// loader queue; ShutdownRetire(m) retires a settled ready model during
// shutdown; CompleteShutdown emits ShutdownComplete once nothing is left.

// MaxInternal bounds the internal steps explored after one event.
const MaxInternal = 200000

// settleAll runs every order of internal steps from each run and returns the
// distinct quiescent outcomes.
func settleAll(runs []*run) ([]Outcome, error) {
	// Fast path: most events settle along one chain of internal steps; no
	// deduplication is needed until the search branches.
	if len(runs) == 1 {
		// The run is the caller's own: its one enabled internal step at a
		// time is taken in place.
		r := runs[0]
		for n := 0; n < MaxInternal; n++ {
			if r.p.Loose && (len(r.s.Loaders) > 0 || r.anyBackoffOpen()) {
				return settleSearch([]*run{r}) // LoaderStep and backed-off admissions have optional outcomes
			}
			k, only := r.enabledInternal()
			switch {
			case k == 0:
				r.one[0] = Outcome{State: r.s, Effects: r.out}
				return r.one[:], nil
			case k > 1:
				return settleSearch([]*run{r})
			}
			r.take(only)
		}
		return nil, fmt.Errorf("abstract: more than %d internal steps after one event", MaxInternal)
	}
	return settleSearch(runs)
}

// internalAction names one enabled internal action: its kind and model.
type internalAction struct {
	kind  uint8 // iaPump, iaLoader, iaRetire, iaComplete
	model int
	plan  loaderPlan
}

const (
	iaPump = iota + 1
	iaLoader
	iaRetire
	iaComplete
)

// enabledInternal counts the enabled internal actions (not in Loose mode)
// as internalSteps would return them, and returns the last one.
func (r *run) enabledInternal() (int, internalAction) {
	s := r.s
	k := 0
	var only internalAction
	for i := range s.Models {
		if r.pumpEnabled(i) {
			k++
			only = internalAction{kind: iaPump, model: i}
		}
	}
	if p := r.planLoader(); p.kind != lpNone {
		k++
		only = internalAction{kind: iaLoader, plan: p}
	}
	for i := range s.Models {
		if r.shutdownRetireEnabled(i) {
			k++
			only = internalAction{kind: iaRetire, model: i}
		}
	}
	if r.completeShutdownEnabled() {
		k++
		only = internalAction{kind: iaComplete}
	}
	return k, only
}

// take takes the internal action a on r itself.
func (r *run) take(a internalAction) {
	switch a.kind {
	case iaPump:
		r.Pump(a.model)
	case iaLoader:
		r.doLoader(a.plan)
	case iaRetire:
		r.ShutdownRetire(a.model)
	case iaComplete:
		r.CompleteShutdown()
	}
}

// settleSearch explores every order of internal steps from runs.
func settleSearch(runs []*run) ([]Outcome, error) {
	var outs []Outcome
	sc := searchPool.Get().(*searchScratch)
	defer sc.reset()
	stack := append([]*run(nil), runs...)
	nodes := 0
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		// A node is its exact state and the effects on the way: each is
		// expanded once, and a quiescent one is an outcome once.
		if !sc.add(r) {
			continue
		}
		nodes++
		if nodes > MaxInternal {
			return nil, fmt.Errorf("abstract: more than %d internal steps after one event", MaxInternal)
		}
		mandatory, optional := r.internalSteps()
		if len(mandatory) == 0 {
			outs = append(outs, Outcome{State: r.s, Effects: r.out})
		}
		stack = append(stack, mandatory...)
		stack = append(stack, optional...)
	}
	return outs, nil
}

// searchScratch is settleSearch's set of visited nodes, reused: the keys
// are strings over an arena of bytes that is only appended to until reset,
// so that adding a node allocates nothing once the arena is large enough.
type searchScratch struct {
	seen  map[string]struct{}
	arena []byte
}

var searchPool = sync.Pool{New: func() any { return &searchScratch{seen: make(map[string]struct{})} }}

// add records r's node and reports whether it is new. The key is appended
// to the arena; when that moves the arena to a larger array, the keys
// already recorded keep the old one, which nothing writes again.
func (sc *searchScratch) add(r *run) bool {
	at := len(sc.arena)
	b := AppendEffectsKey(r.s.AppendExactKey(sc.arena), r.out)
	k := unsafe.String(&b[at], len(b)-at)
	if _, ok := sc.seen[k]; ok {
		sc.arena = b[:at] // not kept: the next key overwrites it
		return false
	}
	sc.seen[k] = struct{}{}
	sc.arena = b
	return true
}

func (sc *searchScratch) reset() {
	clear(sc.seen)
	sc.arena = sc.arena[:0]
	searchPool.Put(sc)
}

// internalSteps returns the successors of r under each enabled internal
// action. Optional steps (loose mode's residency choices) do not keep a state
// from being quiescent.
func (r *run) internalSteps() (mandatory, optional []*run) {
	s := r.s
	for i := range s.Models {
		if r.pumpEnabled(i) {
			f := r.fork()
			f.Pump(i)
			mandatory = append(mandatory, f)
			if md := &s.Models[i]; md.Queue[0].Kind == KReq && r.backoffOpen(i) {
				g := r.fork()
				g.skipBackoff = true
				g.Pump(i)
				g.skipBackoff = false
				mandatory = append(mandatory, g)
			}
		}
	}
	ls := r.LoaderStep()
	if r.p.Loose {
		optional = ls
	} else {
		mandatory = append(mandatory, ls...)
	}
	for i := range s.Models {
		if r.shutdownRetireEnabled(i) {
			f := r.fork()
			f.ShutdownRetire(i)
			mandatory = append(mandatory, f)
		}
	}
	if r.completeShutdownEnabled() {
		f := r.fork()
		f.CompleteShutdown()
		mandatory = append(mandatory, f)
	}
	return mandatory, optional
}

// admittable: the model's state lets requests take slots: the pool is
// published, or it is (or will be) built for requests, not for a manager.
func (r *run) admittable(i int) bool { return admittable(&r.s.Models[i]) }

func admittable(md *Model) bool {
	return md.Life == core.Ready || md.Life == core.Unloaded || (md.Life == core.Loading && !md.HasMgr)
}

// settled: no manager, no lease, no backend step, no pending load.
func (s *State) settled(i int) bool {
	md := &s.Models[i]
	return !md.HasMgr && md.Active() == 0 && md.Job == JNone && !s.InLoaders(i) &&
		(md.Life == core.Unloaded || md.Life == core.Ready)
}

// evictable: ready, published, idle and queue-free, nothing pending
// (CONTRACT res.victim-choice, res.idle-retirement).
func (r *run) evictable(i int) bool { return r.s.evictable(i) }

func (s *State) evictable(i int) bool {
	md := &s.Models[i]
	return md.Published && md.Life == core.Ready && md.Active() == 0 && len(md.Queue) == 0 && !md.HasMgr &&
		md.Job == JNone && !s.InLoaders(i)
}

func (r *run) pumpEnabled(i int) bool {
	md := &r.s.Models[i]
	if len(md.Queue) == 0 || md.HasMgr {
		return false
	}
	if md.Queue[0].Kind == KReq {
		return r.admittable(i) && md.Active() < md.Cfg.Slots
	}
	return md.Active() == 0 && md.Job == JNone && !r.s.InLoaders(i) &&
		(md.Life == core.Unloaded || md.Life == core.Ready)
}

// Pump is the internal action Pump(m): the head of m's FIFO moves. A request
// takes a spare slot (never past a waiting manager: it is the head); a
// manager or bulk barrier is granted once every earlier lease drained
// (CONTRACT order.request-then-manager).
func (r *run) Pump(i int) {
	md := &r.s.Models[i]
	e := md.Queue[0]
	md.Queue = remove(md.Queue, 0)
	if e.Kind == KReq {
		r.admit(i, e.ID, e.Seq)
		return
	}
	r.grantManager(i, e)
}

// admit gives a request a slot: on a published pool it is granted; otherwise
// it waits for the pool, and an unloaded model starts its one cold load.
func (r *run) admit(i int, id, seq uint64) {
	md := &r.s.Models[i]
	if md.Life == core.Ready {
		md.Holders = append(md.Holders, Holder{ID: id, Ver: md.PoolVer, Seq: seq})
		r.emit(Effect{Kind: core.EfGrant, Ticket: id, Model: i, Ver: md.PoolVer})
		return
	}
	if md.Life == core.Unloaded && md.Backoff && !r.skipBackoff {
		// The load would start again while it backs off: refused
		// (CONTRACT fail.load-backoff).
		r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeServerBusy, Model: i})
		return
	}
	md.Holders = append(md.Holders, Holder{ID: id, Wait: true, Seq: seq})
	if md.Life == core.Unloaded {
		r.startLoad(i)
	}
}

// backoffOpen: in loose mode (unknown options) a request that would start
// model i's load after a failure may be refused for a backoff or not.
func (r *run) backoffOpen(i int) bool {
	md := &r.s.Models[i]
	return r.p.Loose && md.Backoff && md.Life == core.Unloaded
}

func (r *run) anyBackoffOpen() bool {
	for i := range r.s.Models {
		if r.backoffOpen(i) {
			return true
		}
	}
	return false
}

func (r *run) startLoad(i int) {
	r.s.Models[i].Life = core.Loading
	r.s.Loaders = append(r.s.Loaders, i)
}

func (r *run) withdrawLoad(i int) {
	for k, x := range r.s.Loaders {
		if x == i {
			r.s.Loaders = remove(r.s.Loaders, k)
			break
		}
	}
	r.s.Models[i].Life = core.Unloaded
}

func (r *run) grantManager(i int, e Entry) {
	md := &r.s.Models[i]
	md.HasMgr, md.Mgr, md.Step = true, e, SNone
	md.Backoff = false // a manager's load is never refused for earlier failures
	switch e.Op {
	case core.OpLoad:
		r.managedLoad(i)
	case core.OpUnload:
		if md.Life == core.Unloaded {
			r.managerDone(i, core.EfDone, core.CodeOK)
			return
		}
		md.Step = SUnload
		r.retire(i, core.CauseUnload)
	case core.OpUnregister:
		if md.Life == core.Unloaded {
			r.managerDone(i, core.EfDone, core.CodeOK)
			r.tombstone(i)
			return
		}
		md.Step = SUnregister
		r.retire(i, core.CauseUnload)
	case core.OpApply:
		r.apply(i, e.Cfg)
	}
}

func (r *run) managedLoad(i int) {
	md := &r.s.Models[i]
	if md.Life == core.Ready {
		r.managerDone(i, core.EfDone, core.CodeOK)
		return
	}
	md.Step = SLoad
	r.startLoad(i)
}

// apply (CONTRACT fail.capacity-probe,
// fail.unsupported-capacity, fail.after-commit): validate before any teardown; unchanged
// session inputs reuse the live advertised capacity, changed multi-slot ones
// are probed privately; failure before commit keeps the old state whole.
func (r *run) apply(i int, cfg *Config) {
	md := &r.s.Models[i]
	old := md.Cfg
	if cfg.equal(old) {
		r.managedLoad(i)
		return
	}
	if cfg.sameSessions(old) && cfg.Slots == old.Slots && cfg.MemoryMB == old.MemoryMB {
		r.commit(i, cfg) // admission metadata only: the pool stays valid
		r.managedLoad(i)
		return
	}
	if cfg.Slots > 1 {
		if md.Published && cfg.sameSessions(old) {
			if cfg.Slots > md.Capacity {
				r.managerDone(i, core.EfReject, core.CodeInvalid)
				return
			}
		} else {
			md.Step = SProbe
			md.Life = core.Reconfiguring
			md.Job = JProbe
			r.emit(Effect{Kind: core.EfStartProbe, Model: i, Cfg: cfg, Ver: md.Ver + 1})
			return
		}
	}
	r.replace(i, cfg)
}

// replace retires the old pool first (if any), then commits and loads.
func (r *run) replace(i int, cfg *Config) {
	md := &r.s.Models[i]
	if md.Published {
		md.Step = STeardownOld
		r.retire(i, core.CauseReconfigure)
		md.Life = core.Reconfiguring
		return
	}
	r.commit(i, cfg)
	md.Step = SLoad
	r.startLoad(i)
	md.Life = core.Reconfiguring
}

// commit publishes a complete new config as the next version: metadata is
// never a partial mix.
func (r *run) commit(i int, cfg *Config) {
	md := &r.s.Models[i]
	md.Cfg = cfg
	md.Ver++
	if md.Published {
		md.PoolVer = md.Ver
	}
}

func (r *run) managerDone(i int, kind core.EffectKind, code core.Code) {
	md := &r.s.Models[i]
	e := md.Mgr
	md.HasMgr, md.Mgr, md.Step, md.FailCode = false, Entry{}, SNone, 0
	if e.Kind == KMember {
		r.bulkCheck(e.Bulk)
		return
	}
	r.emit(Effect{Kind: kind, Ticket: e.ID, Code: code, Model: i})
}

// tombstone (TLA+ Tombstone; CONTRACT.md unreg.barrier, unreg.404-after,
// unreg.tombstone): the unregister, granted on a drained model whose pool
// is gone, has answered; the entry keeps only its ID, version and last
// config, every ticket queued behind the barrier is answered not_found in
// arrival order, and a bulk's barrier on it ends as if unloaded.
func (r *run) tombstone(i int) {
	md := &r.s.Models[i]
	q := md.Queue
	r.s.Models[i] = Model{ID: md.ID, Gone: true, Life: core.Unloaded, Cfg: md.Cfg, Ver: md.Ver}
	var bulks []uint64
	for _, e := range q {
		if e.Kind == KMember {
			bulks = append(bulks, e.Bulk)
			continue
		}
		r.emit(Effect{Kind: core.EfReject, Ticket: e.ID, Code: core.CodeNotFound, Model: i})
	}
	for _, b := range bulks {
		r.bulkCheck(b)
	}
}

// bulkCheck ends bulk id when none of its members is left.
func (r *run) bulkCheck(id uint64) {
	for i := range r.s.Models {
		md := &r.s.Models[i]
		if md.HasMgr && md.Mgr.Kind == KMember && md.Mgr.Bulk == id {
			return
		}
		for _, e := range md.Queue {
			if e.Kind == KMember && e.Bulk == id {
				return
			}
		}
	}
	for k, b := range r.s.Bulks {
		if b.ID != id {
			continue
		}
		r.s.Bulks = remove(r.s.Bulks, k)
		switch b.Reason {
		case 0:
			r.emit(Effect{Kind: core.EfDone, Ticket: id, Bulk: b.Result})
		case core.ReasonDisconnect:
			r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeCancelled})
		default:
			r.emit(Effect{Kind: core.EfReject, Ticket: id, Code: core.CodeShuttingDown})
		}
		return
	}
}

// retire clears a published pool's logical residency and starts its
// teardown; its memory stays charged until TeardownDone (CONTRACT
// "Residency/memory refusal": logical retirement is not free memory).
func (r *run) retire(i int, cause core.Cause) {
	md := &r.s.Models[i]
	if cause == core.CauseEvict || cause == core.CauseIdle {
		r.s.Evicted = append(r.s.Evicted, Evicted{Model: i, Active: md.Active(), Queued: len(md.Queue),
			HadManager: md.HasMgr, WasPublish: md.Published})
	}
	n, v := md.Sessions, md.PoolVer
	md.Life = core.Unloading
	md.Published = false
	md.PoolVer, md.Capacity, md.Sessions, md.Built = 0, 0, 0, 0
	md.Cause = cause
	md.Job = JTeardown
	r.emit(Effect{Kind: core.EfStartTeardown, Model: i, Sessions: n, Cause: cause, Ver: v})
}

func (r *run) unresident(i int) {
	md := &r.s.Models[i]
	md.Resident, md.ResMB = false, 0
}

// failLoad ends a load that did not publish (CONTRACT fail.initial-load): its waiters and manager are rejected,
// private sessions die before the model is unloaded again, and queued
// requests may retry.
func (r *run) failLoad(i int, code core.Code, private int) {
	md := &r.s.Models[i]
	md.Capacity, md.Built = 0, 0
	if (code == core.CodeBackend || code == core.CodeInvalid) && (r.p.LoadBackoff || r.p.Loose) {
		md.Backoff = true // not after a residency refusal (CONTRACT fail.load-backoff)
	}
	hs := md.Holders[:0:0]
	for _, h := range md.Holders {
		if h.Wait {
			r.emit(Effect{Kind: core.EfReject, Ticket: h.ID, Code: code, Model: i})
			continue
		}
		hs = append(hs, h)
	}
	md.Holders = hs
	if private > 0 {
		// A manager keeps its exclusive ownership until the private sessions
		// are gone, so its answer finds the model unloaded (CONTRACT
		// reg.first-load-failure); waiting requests are answered at once.
		if md.HasMgr {
			md.Step, md.FailCode = SFailTeardown, code
		}
		md.Life = core.Unloading
		md.Cause = core.CauseFailedLoad
		md.Job = JTeardown
		r.emit(Effect{Kind: core.EfStartTeardown, Model: i, Sessions: private, Cause: core.CauseFailedLoad, Ver: md.Ver})
		return
	}
	if md.HasMgr {
		r.managerDone(i, core.EfReject, code)
	}
	r.unresident(i)
	md.Life = core.Unloaded
}

func (r *run) nextClone(i int) {
	md := &r.s.Models[i]
	if md.Built < md.Cfg.Slots {
		md.Job = JClone
		r.emit(Effect{Kind: core.EfStartClone, Model: i, Index: md.Built, Ver: md.Ver})
		return
	}
	r.publish(i)
}

// publish makes the complete pool serve (CONTRACT state.loading): waiting admitted requests are granted, a managing load
// finishes.
func (r *run) publish(i int) {
	md := &r.s.Models[i]
	md.Life = core.Ready
	md.Published = true
	md.Sessions = md.Built
	md.PoolVer = md.Ver
	md.LastUse = r.now
	md.Backoff = false
	for k := range md.Holders {
		if h := &md.Holders[k]; h.Wait {
			h.Wait, h.Ver = false, md.PoolVer
			r.emit(Effect{Kind: core.EfGrant, Ticket: h.ID, Model: i, Ver: md.PoolVer})
		}
	}
	if md.HasMgr && md.Step == SLoad {
		r.managerDone(i, core.EfDone, core.CodeOK)
	}
}

func (r *run) shutdownRetireEnabled(i int) bool {
	md := &r.s.Models[i]
	return r.s.Shutdown && r.s.settled(i) && md.Life == core.Ready && len(md.Queue) == 0
}

// ShutdownRetire is the internal action ShutdownRetire(m): during shutdown a
// settled ready model is torn down once nothing uses it (CONTRACT ops.shutting-down.evict).
func (r *run) ShutdownRetire(i int) { r.retire(i, core.CauseShutdown) }

func (r *run) completeShutdownEnabled() bool {
	s := r.s
	if !s.Shutdown || s.ShutdownSent || s.LiveTickets() > 0 || s.Jobs() > 0 || len(s.Loaders) > 0 {
		return false
	}
	for i := range s.Models {
		if s.Models[i].Resident {
			return false
		}
	}
	return true
}

// CompleteShutdown is the internal action CompleteShutdown: nothing is
// admitted, running or resident any more.
func (r *run) CompleteShutdown() {
	r.s.ShutdownSent = true
	r.emit(Effect{Kind: core.EfShutdownComplete})
}
