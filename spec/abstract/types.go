package abstract

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/core"
)

// Kind says what a queue entry stands for.
type Kind uint8

// The entry kinds.
const (
	KReq    Kind = iota + 1 // an inference request
	KMgr                    // a targeted manager (apply, load, unload)
	KMember                 // the barrier of one bulk unload on one model
)

// MStep is where the granted manager of a model stands (TLA+ mstep).
type MStep uint8

// The manager steps, numbered as core's ModelView.ManagerStep names them.
const (
	SNone MStep = iota
	SProbe
	STeardownOld
	SLoad
	SUnload
	SFailTeardown // waits for the private sessions of its failed load to go
	SUnregister   // waits for the unregister's teardown, then leaves a tombstone
)

var stepNames = [...]string{"none", "probe", "teardown_old", "load", "unload", "fail_teardown", "unregister"}

// String returns the step's name as core.ModelView.ManagerStep spells it.
func (s MStep) String() string { return stepNames[s] }

// ParseStep returns the step named n.
func ParseStep(n string) (MStep, bool) {
	switch n { // a switch, not a loop over stepNames: the model checker parses every model's step per transition
	case "none":
		return SNone, true
	case "probe":
		return SProbe, true
	case "teardown_old":
		return STeardownOld, true
	case "load":
		return SLoad, true
	case "unload":
		return SUnload, true
	case "fail_teardown":
		return SFailTeardown, true
	case "unregister":
		return SUnregister, true
	}
	return 0, false
}

// Job is the backend step a model waits for.
type Job uint8

// The jobs, numbered as core's ModelView.JobKind names them.
const (
	JNone Job = iota
	JLoad
	JClone
	JProbe
	JTeardown
)

var jobNames = [...]string{"none", "load", "clone", "probe", "teardown"}

// String returns the job's name.
func (j Job) String() string { return jobNames[j] }

// ParseJob returns the job named n.
func ParseJob(n string) (Job, bool) {
	switch n { // as ParseStep
	case "none":
		return JNone, true
	case "load":
		return JLoad, true
	case "clone":
		return JClone, true
	case "probe":
		return JProbe, true
	case "teardown":
		return JTeardown, true
	}
	return 0, false
}

// Config is a model configuration as a value. Configs are interned (Intern)
// so that a state refers to them by pointer and a key by ID.
type Config struct {
	Task, Engine, Checkpoint, Options string
	Slots                             int
	AdmissionTimeout                  int64
	MaxQueue                          int
	MemoryMB                          int64
	// Aliases are core.Config.Aliases: metadata like MaxQueue (a change
	// of them alone commits a version and keeps the pool).
	Aliases string
	// VoiceMap is core.Config.VoiceMap: metadata as Aliases are.
	VoiceMap string

	id int // intern number, 0 for a config not interned
}

// ID returns the config's intern number.
func (c *Config) ID() int { return c.id }

func (c *Config) sameSessions(o *Config) bool {
	return c.Task == o.Task && c.Engine == o.Engine && c.Checkpoint == o.Checkpoint && c.Options == o.Options
}

func (c *Config) equal(o *Config) bool {
	return c.Task == o.Task && c.Engine == o.Engine && c.Checkpoint == o.Checkpoint && c.Options == o.Options &&
		c.Slots == o.Slots && c.AdmissionTimeout == o.AdmissionTimeout && c.MaxQueue == o.MaxQueue &&
		c.MemoryMB == o.MemoryMB && c.Aliases == o.Aliases && c.VoiceMap == o.VoiceMap
}

func (c *Config) valid() bool {
	return c != nil && c.Slots >= 1 && c.Slots <= core.MaxSlots && c.AdmissionTimeout >= core.NoTimeout && c.MaxQueue >= 0 &&
		c.MemoryMB >= 0
}

// String prints the config briefly.
func (c *Config) String() string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("c%d{%s slots=%d mem=%d q=%d}", c.id, c.Options, c.Slots, c.MemoryMB, c.MaxQueue)
}

// ConfigTable interns configs: equal configs get one shared *Config and
// one ID (the byte a state key holds). A check owns one (env.Bound.Table),
// shared by every system that explores the bound, so the spec's states and
// the abstracted core's have the same keys; trace validation owns its own.
// Safe for concurrent use: a model checker resolves the same handful of
// configs millions of times from several goroutines.
type ConfigTable struct {
	mu      sync.Mutex
	byValue map[Config]*Config
	byCore  sync.Map // *core.Config -> *Config
	// recent holds the last few configs FromCore resolved, read without a lock.
	recent atomic.Pointer[[]corePair]
}

// NewConfigTable returns an empty table.
func NewConfigTable() *ConfigTable { return &ConfigTable{byValue: make(map[Config]*Config)} }

// Intern returns the one shared *Config equal to c.
func (t *ConfigTable) Intern(c Config) *Config {
	c.id = 0
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.byValue[c]; ok {
		return p
	}
	p := c
	p.id = len(t.byValue) + 1
	t.byValue[c] = &p
	return &p
}

// corePair is one entry of FromCore's cache.
type corePair struct {
	c *core.Config
	p *Config
}

const recentCoreLen = 16

// FromCore returns the interned abstract config of a core config (nil for nil).
func (t *ConfigTable) FromCore(c *core.Config) *Config {
	if c == nil {
		return nil
	}
	rs := t.recent.Load()
	if rs != nil {
		for _, x := range *rs {
			if x.c == c {
				return x.p
			}
		}
	}
	var p *Config
	if x, ok := t.byCore.Load(c); ok {
		p = x.(*Config)
	} else {
		p = t.Intern(Config{Task: c.Task, Engine: c.Engine, Checkpoint: c.Checkpoint, Options: c.Options, Slots: c.Slots,
			AdmissionTimeout: c.AdmissionTimeout, MaxQueue: c.MaxQueue, MemoryMB: c.MemoryMB, Aliases: c.Aliases, VoiceMap: c.VoiceMap})
		t.byCore.Store(c, p)
	}
	next := []corePair{{c: c, p: p}}
	if rs != nil {
		next = append(next, (*rs)[:min(len(*rs), recentCoreLen-1)]...)
	}
	t.recent.Store(&next)
	return p
}

// Holder is an admitted request: it owns one slot of its model. Wait holders
// wait for the pool; the others run, bound to config version Ver.
type Holder struct {
	ID   uint64
	Wait bool
	Ver  uint64
	Seq  uint64 // arrival order
}

// Entry is one queued ticket (or a granted manager).
type Entry struct {
	ID      uint64
	Kind    Kind
	Op      core.Op
	Cfg     *Config // OpApply only
	Bounded bool    // has an admission deadline
	Bulk    uint64  // KMember: the parent's ID
	Seq     uint64  // arrival order
}

// Bulk is a live bulk unload parent: it ends when its last member does.
type Bulk struct {
	ID     uint64
	Seq    uint64
	Reason core.Reason // 0, ReasonDisconnect, or ReasonShutdown
	Result *core.BulkResult
}

// ReasonShutdown marks a bulk whose queued members the shutdown rejected.
const ReasonShutdown core.Reason = 255

// Model is one registry entry (TLA+ models[m]).
type Model struct {
	ID string
	// Gone marks a tombstone (TLA+ reg = FALSE for an ID once registered):
	// the model was unregistered, holds nothing, and keeps Ver (and its
	// last Cfg) so that a re-registration of the ID reuses the entry and
	// starts past Ver (CONTRACT.md unreg.tombstone, unreg.re-register).
	Gone      bool
	Life      core.State
	Cfg       *Config // committed config
	Ver       uint64  // committed version
	Published bool
	PoolVer   uint64 // version of the published pool (0 when none)
	Sessions  int    // sessions of the published pool
	Capacity  int    // advertised capacity of the live or building pool
	Built     int    // sessions of the private pool being built
	Holders   []Holder
	Queue     []Entry
	HasMgr    bool
	Mgr       Entry
	Step      MStep
	FailCode  core.Code // SFailTeardown: the answer the manager gets
	Job       Job
	JobID     uint64 // trace validation only: the job number of the running job
	Cause     core.Cause
	Resident  bool
	ResMB     int64
	LastUse   int64 // when a lease of its pool last ended, or it was published (eviction order)
	// Backoff: the last load failed and its backoff has not been forgotten
	// by a Tick, a granted manager or a successful load; meanwhile a
	// request that would start the load is refused (CONTRACT
	// fail.load-backoff).
	Backoff bool
}

// Evicted records a model retired by eviction or idle retirement in the last
// step, with what it held at that moment (for EvictOnlyIdle).
type Evicted struct {
	Model                  int
	Active, Queued         int
	HadManager, WasPublish bool
}

// State is one state of the spec.
type State struct {
	Models       []Model // registry in registration order (core's handles)
	Loaders      []int   // models waiting for residency or the cold-load guard
	Bulks        []Bulk  // live bulk parents in submission order
	Shutdown     bool
	ShutdownSent bool
	Seq          uint64    // last arrival number handed out
	NextID       uint64    // ticket numbers for a standalone run
	Clock        int64     // event times of a standalone run
	Evicted      []Evicted // history variable of the last step
}

// Effect is one effect the spec emits, comparable with an abstracted core effect.
type Effect struct {
	Kind     core.EffectKind
	Ticket   uint64
	Model    int
	Code     core.Code
	Ver      uint64
	Cfg      *Config
	Index    int
	Sessions int
	Cause    core.Cause
	Bulk     *core.BulkResult
}

// Params are the spec's constants besides the model universe.
type Params struct {
	MaxLoaded          int
	MemoryBudgetMB     int64
	SerializeColdLoads bool
	IdleRetire         bool  // Options.IdleTimeout > 0
	DefaultTimeout     int64 // Options.DefaultAdmissionTimeout
	Ceiling            int64 // Options.AdmissionCeiling
	LoadBackoff        bool  // Options.LoadBackoff > 0
	// Loose leaves undecided what depends on unknown options (trace validation
	// without an options file): residency and cold-load decisions, deadlines
	// and idle retirement become free choices.
	Loose bool

	_ struct{}
}

// ParamsOf returns the spec constants for core options.
func ParamsOf(o core.Options) Params {
	return Params{MaxLoaded: o.MaxLoadedModels, MemoryBudgetMB: o.MemoryBudgetMB, SerializeColdLoads: o.SerializeColdLoads,
		IdleRetire: o.IdleTimeout > 0, DefaultTimeout: o.DefaultAdmissionTimeout, Ceiling: o.AdmissionCeiling,
		LoadBackoff: o.LoadBackoff > 0}
}

// Clone returns a deep copy of s (configs and bulk results are shared: they
// are immutable).
func (s *State) Clone() *State {
	c := *s
	c.Models = make([]Model, len(s.Models))
	// One backing array for all holders and one for all queues; each model
	// gets a slice of it with no spare capacity, so an append reallocates
	// instead of writing into the next model's part.
	nh, nq := 0, 0
	for i := range s.Models {
		nh += len(s.Models[i].Holders)
		nq += len(s.Models[i].Queue)
	}
	hs, qs := make([]Holder, nh), make([]Entry, nq)
	for i := range s.Models {
		md := s.Models[i]
		if n := copy(hs, md.Holders); n > 0 {
			md.Holders, hs = hs[:n:n], hs[n:]
		} else {
			md.Holders = nil
		}
		if n := copy(qs, md.Queue); n > 0 {
			md.Queue, qs = qs[:n:n], qs[n:]
		} else {
			md.Queue = nil
		}
		c.Models[i] = md
	}
	c.Loaders = append([]int(nil), s.Loaders...)
	c.Bulks = append([]Bulk(nil), s.Bulks...)
	c.Evicted = nil
	return &c
}

// Lookup returns the index of registered model id, or -1 (also for a
// tombstone).
func (s *State) Lookup(id string) int {
	if i := s.Entry(id); i >= 0 && !s.Models[i].Gone {
		return i
	}
	return -1
}

// Entry returns the index of id's registry entry, a tombstone included, or -1.
func (s *State) Entry(id string) int {
	for i := range s.Models {
		if s.Models[i].ID == id {
			return i
		}
	}
	return -1
}

// Active returns the number of admitted requests of model i.
func (md *Model) Active() int { return len(md.Holders) }

// WaitInit returns the number of admitted requests waiting for the pool.
func (md *Model) WaitInit() int {
	n := 0
	for _, h := range md.Holders {
		if h.Wait {
			n++
		}
	}
	return n
}

// QueuedRequests returns the number of queued requests.
func (md *Model) QueuedRequests() int {
	n := 0
	for _, e := range md.Queue {
		if e.Kind == KReq {
			n++
		}
	}
	return n
}

// InLoaders reports whether model i waits in the loader queue.
func (s *State) InLoaders(i int) bool {
	for _, x := range s.Loaders {
		if x == i {
			return true
		}
	}
	return false
}

// Loads returns the loads in flight (started, not yet published or failed).
func (s *State) Loads() int {
	n := 0
	for i := range s.Models {
		if j := s.Models[i].Job; j == JLoad || j == JClone {
			n++
		}
	}
	return n
}

// Jobs returns the backend jobs in flight.
func (s *State) Jobs() int {
	n := 0
	for i := range s.Models {
		if s.Models[i].Job != JNone {
			n++
		}
	}
	return n
}

// LiveTickets returns the number of tickets that have not ended.
func (s *State) LiveTickets() int {
	n := len(s.Bulks)
	for i := range s.Models {
		md := &s.Models[i]
		n += len(md.Holders) + len(md.Queue)
		if md.HasMgr {
			n++
		}
	}
	return n
}

// Waiting reports whether some ticket waits to be served: queued, admitted
// but waiting for its pool, a granted manager, or a bulk parent.
func (s *State) Waiting() bool {
	if len(s.Bulks) > 0 {
		return true
	}
	for i := range s.Models {
		md := &s.Models[i]
		if len(md.Queue) > 0 || md.HasMgr || md.WaitInit() > 0 {
			return true
		}
	}
	return false
}

// FindTicket locates a live ticket by ID.
func (s *State) FindTicket(id uint64) (where TicketPlace, model, index int) {
	if id == 0 {
		return PlaceNone, -1, -1
	}
	for i := range s.Models {
		md := &s.Models[i]
		for k, h := range md.Holders {
			if h.ID == id {
				if h.Wait {
					return PlaceWait, i, k
				}
				return PlaceRunning, i, k
			}
		}
		for k, e := range md.Queue {
			if e.ID == id && e.Kind != KMember {
				return PlaceQueued, i, k
			}
		}
		if md.HasMgr && md.Mgr.ID == id && md.Mgr.Kind != KMember {
			return PlaceManaging, i, -1
		}
	}
	for k, b := range s.Bulks {
		if b.ID == id {
			return PlaceBulk, -1, k
		}
	}
	return PlaceNone, -1, -1
}

// TicketPlace says where a live ticket stands.
type TicketPlace uint8

// The ticket places.
const (
	PlaceNone TicketPlace = iota
	PlaceQueued
	PlaceWait
	PlaceRunning
	PlaceManaging
	PlaceBulk
)
