package core

import (
	"errors"
	"fmt"
)

// Sentinel errors for events that cannot apply. They mean the shell is out of
// step with the machine (a bug in the shell), never a client outcome: client
// outcomes are Reject effects.
var (
	ErrUnknownTicket = errors.New("core: unknown or finished ticket")
	ErrNotRunning    = errors.New("core: ticket holds no lease to release")
	ErrStaleJob      = errors.New("core: stale or unknown job")
)

// jobKind is the backend step a model waits for.
type jobKind uint8

const (
	jobNone jobKind = iota
	jobLoad
	jobClone
	jobProbe
	jobTeardown
)

var jobNames = [...]string{"none", "load", "clone", "probe", "teardown"}

// mstep is where the granted manager of a model stands.
type mstep uint8

const (
	msNone         mstep = iota
	msProbe              // waits for ProbeDone of the replacement
	msTeardownOld        // waits for the old pool's teardown before commit
	msLoad               // waits for the load it started
	msUnload             // waits for the unload teardown
	msFailTeardown       // waits for the private sessions of its failed load to go
	msUnregister         // waits for the unregister's teardown, then leaves a tombstone
)

var mstepNames = [...]string{"none", "probe", "teardown_old", "load", "unload", "fail_teardown", "unregister"}

// model is one registry entry. Entries are never erased: an unregistered
// model is a tombstone (gone) that keeps its id, handle, last config and
// version, holds nothing, and is reused when its ID registers again.
type model struct {
	id      string
	gone    bool
	state   State
	cfg     *Config
	version uint64 // committed config version, 1 at registration

	published   bool   // a complete pool serves (state Ready)
	capacity    int    // advertised capacity of the live or building pool
	sessions    int    // sessions of the published pool
	built       int    // sessions of the private pool being built
	poolVersion uint64 // config version the published pool was built from

	busy     uint16 // slot bitmap of admitted requests
	slotT    [MaxSlots]int32
	active   int // admitted requests, including those waiting for the pool
	waitInit int // admitted requests waiting for the pool

	head, tail int32 // FIFO of queued tickets
	nReq, nMgr int

	mgr   int32 // granted manager ticket, -1 for none
	step  mstep
	fail  Code    // msFailTeardown: the code the manager gets
	pend  *Config // replacement config of the granted manager
	job   Job
	jkind jobKind
	cause Cause // of the running teardown

	inLoaders bool  // waiting for the residency ledger or the cold-load guard
	resident  bool  // charged to the residency ledger
	resMB     int64 // what was charged
	lastUsed  int64
	dirty     bool
	touchedIn uint64 // the Machine.epoch in which it joined Machine.touched

	// loadFails counts failed loads since the last successful one or the
	// last granted manager; backoffUntil (0: none) is when the backoff after
	// the last of them ends (CONTRACT.md fail.load-backoff).
	loadFails    int
	backoffUntil int64

	// wantLoaded is the desired state the last manager that succeeded on
	// the model left: true after a register, reconfigure or load, false
	// after an unload or a bulk member (and at registration, until its load
	// succeeds). Evictions and idle retirement leave it alone. Nothing in
	// the machine reads it; the persistent registry records it.
	wantLoaded bool
}

func (md *model) settled() bool {
	return md.mgr < 0 && md.active == 0 && md.jkind == jobNone && !md.inLoaders &&
		(md.state == Unloaded || md.state == Ready)
}

func (md *model) evictable() bool {
	return md.published && md.state == Ready && md.active == 0 && md.head < 0 && md.mgr < 0 &&
		md.jkind == jobNone && !md.inLoaders
}

// Machine is the scheduler state machine. See the package documentation for
// its contract and threading rule.
type Machine struct {
	opts   Options
	models []model
	index  map[string]Handle
	ts     tickets
	out    []Effect

	seq     uint64 // enqueue order across the machine
	jobSeq  uint32
	jobs    int // backend jobs in flight
	loads   int // loads between StartLoad and publication or failure
	loaders []Handle

	resCount int
	resMB    int64

	shutdown     bool
	shutdownSent bool

	// why is the reason the Rejects of the current event carry, and
	// submitted the ticket the current event submitted (refused on arrival
	// when it is rejected at once); begin sets both.
	why       RejectReason
	submitted Ticket

	dirty    []Handle
	loadersD bool
	touched  []Handle // models the events since the last Advance changed (Touched)
	epoch    uint64   // counts Advances: a model is on touched when its touchedIn is the epoch

	evicted []evictRecord // victims retired by the current event, for EvictOnlyIdle

	later []pendingMembers // MutBulkOneByOne only

	scratch []int32 // reused by CheckInvariants
}

type evictRecord struct {
	model          Handle
	active, queued int
	mgr, published bool
}

// reasonShutdown marks a bulk parent whose queued members shutdown rejected.
const reasonShutdown Reason = 255

// New returns an empty machine.
func New(opts Options) (*Machine, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("core.New: %w", err)
	}
	return &Machine{opts: opts, index: make(map[string]Handle), out: make([]Effect, 0, 64)}, nil
}

// Options returns the machine's options.
func (m *Machine) Options() Options { return m.opts }

// Lookup resolves a registered model's ID to its handle; an unknown or
// unregistered ID is not found.
func (m *Machine) Lookup(id string) (Handle, bool) {
	h, ok := m.index[id]
	return h, ok && !m.models[h].gone
}

// Entry resolves an ID to its registry entry, a tombstone included.
func (m *Machine) Entry(id string) (Handle, bool) {
	h, ok := m.index[id]
	return h, ok
}

// Unregistered reports whether h is a tombstone: the entry of a model that
// was unregistered and not registered again.
func (m *Machine) Unregistered(h Handle) bool { return m.models[h].gone }

// ID returns the model ID of a handle.
func (m *Machine) ID(h Handle) string { return m.models[h].id }

// Config returns a copy of the committed config of a model: the machine's
// own is never handed out, so nothing outside can change it.
func (m *Machine) Config(h Handle) Config { return *m.models[h].cfg }

// Len returns the number of registry entries, tombstones included (handles
// run from 0 to Len()-1).
func (m *Machine) Len() int { return len(m.models) }

// ShuttingDown reports whether BeginShutdown has happened.
func (m *Machine) ShuttingDown() bool { return m.shutdown }

// Effects returns the effects emitted since the last Advance, in order. The
// slice is reused: copy what must outlive the next Advance.
func (m *Machine) Effects() []Effect { return m.out }

// Advance clears the effect buffer. Call it after carrying out Effects.
func (m *Machine) Advance() {
	m.out = m.out[:0]
	m.evicted = m.evicted[:0]
	m.epoch++ // forgets every model's membership of touched without a loop
	m.touched = m.touched[:0]
}

// Touched returns the models whose status the events since the last
// Advance may have changed, each once: every model whose Status differs
// from the one at the last Advance is among them (a new registration too).
// They are the models the events marked for scheduling, queued a ticket
// of, gave a slot of while its pool is built (a cold load starts there), or
// named in an effect. The slice is reused like Effects'.
// Observers take these models' statuses after a step instead of replaying
// it; rapid's reference (checkTouched) compares every status around every
// event.
func (m *Machine) Touched() []Handle {
	for i := range m.out {
		if h := m.out[i].Model; m.out[i].Kind != EfShutdownComplete && int(h) < len(m.models) {
			m.touch(h)
		}
	}
	return m.touched
}

func (m *Machine) touch(h Handle) {
	if md := &m.models[h]; md.touchedIn != m.epoch+1 {
		md.touchedIn = m.epoch + 1 // +1: the zero value is never a member
		m.touched = append(m.touched, h)
	}
}

// mut reports whether planted bug x is on; in a build without the
// sluice_mutants tag it is the constant false.
func (m *Machine) mut(x Mutants) bool { return mutantsBuilt && m.opts.Mutants&x != 0 }

// begin starts an event whose Rejects happen for why.
func (m *Machine) begin(why RejectReason) { m.why, m.submitted = why, 0 }

// register publishes a new entry with its first committed config, or
// revives id's tombstone past its last version (CONTRACT.md
// unreg.re-register): the handle stays the ID's, and so does its place in
// Machine.touched for the current epoch.
func (m *Machine) register(id string, cfg *Config, version uint64) Handle {
	if h, ok := m.index[id]; ok {
		md := &m.models[h]
		*md = model{id: id, state: Unloaded, cfg: cfg, version: max(version, md.version+1), head: -1, tail: -1, mgr: -1,
			touchedIn: md.touchedIn}
		return h
	}
	h := Handle(len(m.models))
	m.models = append(m.models, model{id: id, state: Unloaded, cfg: cfg, version: version, head: -1, tail: -1, mgr: -1})
	m.index[id] = h
	return h
}

// --- effects ---

func (m *Machine) emit(e Effect) { m.out = append(m.out, e) }

func (m *Machine) newJob(h Handle, k jobKind) Job {
	md := &m.models[h]
	m.jobSeq++
	j := Job(uint64(h)<<32 | uint64(m.jobSeq))
	md.job, md.jkind = j, k
	m.jobs++
	return j
}

// jobModel resolves a completion to its model, checking the job is current.
func (m *Machine) jobModel(j Job, k jobKind) (*model, Handle, error) {
	h := Handle(j >> 32)
	if int(h) >= len(m.models) {
		return nil, 0, fmt.Errorf("%w: %d", ErrStaleJob, j)
	}
	md := &m.models[h]
	if md.job != j || md.jkind != k || j == 0 {
		return nil, 0, fmt.Errorf("%w: %d (%s)", ErrStaleJob, j, jobNames[k])
	}
	md.job, md.jkind = 0, jobNone
	m.jobs--
	return md, h, nil
}

// finish ends a ticket with a terminal Reject or Done and frees it.
func (m *Machine) finish(i int32, kind EffectKind, code Code) { m.finishWith(i, kind, code, nil) }

func (m *Machine) finishWith(i int32, kind EffectKind, code Code, st *ModelStatus) {
	t := &m.ts.t[i]
	e := Effect{Kind: kind, Code: code, Model: t.model, Ticket: m.ts.id(i), Status: st, Committed: t.committed}
	if kind == EfReject {
		e.Reason = m.why
		if e.Ticket == m.submitted {
			e.Reason = RejectOnArrival
		}
	}
	if t.kind == tkBulk && kind == EfDone {
		e.Bulk = t.bulk
	}
	parent := t.parent
	member := t.kind == tkManager && parent >= 0
	if !member {
		m.emit(e)
	}
	m.ts.release(i)
	if member {
		m.memberDone(parent)
	}
}

// memberDone counts a finished bulk member against its parent.
func (m *Machine) memberDone(p int32) {
	pt := &m.ts.t[p]
	pt.pending--
	if pt.pending > 0 {
		m.nextLater(p)
		return
	}
	why := m.why
	switch pt.reason {
	case 0:
		m.finish(p, EfDone, CodeOK)
	case ReasonDisconnect:
		m.why = RejectDisconnect
		m.finish(p, EfReject, CodeCancelled)
	default:
		m.why = RejectShutdown
		m.finish(p, EfReject, CodeShuttingDown)
	}
	m.why = why
}

// --- queue ---

func (m *Machine) enqueue(h Handle, i int32) {
	md := &m.models[h]
	t := &m.ts.t[i]
	m.seq++
	t.seq, t.phase, t.prev, t.next = m.seq, phQueued, md.tail, -1
	if md.tail >= 0 {
		m.ts.t[md.tail].next = i
	} else {
		md.head = i
	}
	md.tail = i
	if t.kind == tkRequest {
		md.nReq++
	} else {
		md.nMgr++
	}
	m.touch(h) // its queue lengths changed, and no effect may name it
}

func (m *Machine) unlink(i int32) {
	t := &m.ts.t[i]
	md := &m.models[t.model]
	if t.prev >= 0 {
		m.ts.t[t.prev].next = t.next
	} else {
		md.head = t.next
	}
	if t.next >= 0 {
		m.ts.t[t.next].prev = t.prev
	} else {
		md.tail = t.prev
	}
	t.prev, t.next = -1, -1
	if t.kind == tkRequest {
		md.nReq--
	} else {
		md.nMgr--
	}
}

// --- settling ---

func (m *Machine) markDirty(h Handle) {
	m.touch(h)
	md := &m.models[h]
	if !md.dirty {
		md.dirty = true
		m.dirty = append(m.dirty, h)
	}
}

// settle runs the scheduling consequences of an event until nothing changes:
// dirty models pump their FIFO, the loader queue starts what fits, and a
// shutting-down machine retires what went idle.
func (m *Machine) settle(now int64) {
	for {
		if n := len(m.dirty); n > 0 {
			h := m.dirty[0]
			copy(m.dirty, m.dirty[1:])
			m.dirty = m.dirty[:n-1]
			m.models[h].dirty = false
			m.pump(now, h)
			if m.shutdown {
				m.shutdownRetire(now, h)
			}
			continue
		}
		if m.loadersD {
			m.loadersD = false
			m.pumpLoaders(now)
			continue
		}
		break
	}
	if m.shutdown && !m.shutdownSent && m.ts.live == 0 && m.jobs == 0 && m.resCount == 0 && len(m.loaders) == 0 {
		m.shutdownSent = true
		m.emit(Effect{Kind: EfShutdownComplete})
	}
}
