package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// Options configure a Runtime.
type Options struct {
	// Core are the scheduler's machine-wide settings: residency limits, idle
	// retirement, admission defaults and ceiling, the cold-load guard.
	Core core.Options
	// Engines maps engine names (ModelSpec.Engine) to engines.
	Engines backends.Registry
	// Trace, when set, receives every event and effect as one ndjson line
	// (core.Record), in the order the machine processed them. Nil: off, and
	// nothing is allocated for it.
	Trace io.Writer
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// WaitBuckets are the upper bounds of the admission wait histogram kept
	// per model (AdmissionStats); nil keeps counts and sums only.
	WaitBuckets []time.Duration
	// CheckInvariants runs core.CheckInvariants after every event and panics
	// on a violation, printing it. For tests; it costs a full state walk.
	CheckInvariants bool
	// LiveInvariants checks core's invariants in production at a bounded
	// cost (live.go): once per LiveInvariants events, times one more for
	// every 8 registry entries and live tickets (a walk's cost grows with
	// them); a violation is counted (InvariantViolations) and logged with
	// the events before it, never a panic. 0: off. Ignored with
	// CheckInvariants, which checks every event.
	LiveInvariants int
	// MaxModels caps the registered models (--max-models; 0: unlimited):
	// an Apply that would register a new ID past it is refused, decided in
	// the critical section that registers it (CONTRACT.md err.max-models).
	MaxModels int

	_ struct{}
}

// Runtime is the live scheduler: the core machine behind one mutex, waiter
// channels, timers, contexts and the goroutines that run backend steps. See
// the package documentation for its threading rule.
type Runtime struct {
	// Immutable after New.
	engines    backends.Registry
	copts      core.Options
	log        *slog.Logger
	start      time.Time
	idle       int64
	checkInv   bool
	maxModels  int // Options.MaxModels
	trace      io.Writer
	live       liveCheck // under mu, except violations
	waitBounds []time.Duration

	// disagreements counts effects the shell could not carry out as the
	// core said (Disagreements); with CheckInvariants each one panics.
	disagreements atomic.Int64

	// mu guards everything below it up to the next blank-line group: the
	// machine and the runtime's view of pools and waiters. Never held across
	// a wait, a backend call or I/O.
	mu        sync.Mutex
	m         *core.Machine
	last      int64        // time of the last event, for monotonic event times
	models    []pools      // by core.Handle
	waiters   []waitEntry  // by ticket index (low 32 bits)
	dl        deadlineHeap // the queued tickets' admission deadlines (deadlines.go)
	reqIDs    []reqID      // request IDs by ticket index, for Busy
	obs       bool         // trace or full observers: build every step
	obsLife   bool         // lifecycle observers: build the steps with backend work
	obsStatus bool         // an observer wants the touched models' statuses
	tbuf      []byte       // trace lines not yet written
	subs      []*observer
	tickAt    int64                     // when the idle timer fires; 0: not armed
	unknown   admissionStats            // refusals of IDs never registered
	claims    map[core.Ticket]nameClaim // the aliases of live Apply tickets (names.go)
	hints     map[string]string         // alias -> model ID, verified on use (names.go)
	hinted    map[string][]string       // model ID -> the aliases hints has for it (names.go)

	tmu    sync.Mutex // serialises trace writes, in machine order
	tspare []byte

	waiterPool sync.Pool

	mgrs managerWatch // WatchManagers (managers.go)

	// timerLag makes every waiter's admission timer fire this much late:
	// a machine stalled past a deadline, for tests (deadlines.go). Set
	// before the first submission; 0 in production.
	timerLag time.Duration

	wg         sync.WaitGroup // backend step goroutines
	workCtx    context.Context
	hardCancel context.CancelFunc
	stopping   chan struct{} // closed when Shutdown begins
	complete   chan struct{} // closed on ShutdownComplete
	beginOnce  sync.Once
	joinOnce   sync.Once
	tickTimer  *time.Timer
	tickStop   chan struct{}
	tickDone   chan struct{}
}

// pools is the runtime's side of one model: the sessions of the pool being
// built and of the published pool. The core decides when each changes; the
// runtime only keeps the session values (a Grant's Slot indexes published).
type pools struct {
	private   []backends.Session
	published []backends.Session
	retiring  []backends.Session // a retired pool until its StartTeardown (same event)
	task      string             // the task of the published pool's config (a Grant's, AcquireTask)
	engine    string             // the engine of the published pool's config (a Grant's, Lease.Engine)
	stats     admissionStats
	jobSince  int64 // when the model's current backend job started (Busy)
}

// New returns a running Runtime. Call Shutdown to stop it: it owns
// goroutines and timers until then.
func New(opts Options) (*Runtime, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Core.Mutants == 0 {
		mu, err := mutantsFromEnv(log)
		if err != nil {
			return nil, fmt.Errorf("runtime.New: %w", err)
		}
		opts.Core.Mutants = mu
	}
	m, err := core.New(opts.Core)
	if err != nil {
		return nil, fmt.Errorf("runtime.New: %w", err)
	}
	engines := make(backends.Registry, len(opts.Engines)) // a private copy: read without locks
	for name, e := range opts.Engines {
		engines[name] = e
	}
	workCtx, cancel := context.WithCancel(context.Background())
	r := &Runtime{
		engines: engines, copts: opts.Core, log: log, start: time.Now(), idle: opts.Core.IdleTimeout,
		checkInv: opts.CheckInvariants, trace: opts.Trace, m: m, obs: opts.Trace != nil, maxModels: max(opts.MaxModels, 0),
		live:       liveCheck{every: max(opts.LiveInvariants, 0), due: max(opts.LiveInvariants, 0)},
		waitBounds: append([]time.Duration(nil), opts.WaitBuckets...),
		workCtx:    workCtx, hardCancel: cancel, stopping: make(chan struct{}), complete: make(chan struct{}),
	}
	if r.idle > 0 || opts.Core.LoadBackoff > 0 {
		r.tickTimer = time.NewTimer(time.Hour)
		r.tickTimer.Stop()
		r.tickStop = make(chan struct{})
		r.tickDone = make(chan struct{})
		go r.tickLoop()
	}
	return r, nil
}

// clock returns the runtime's monotonic time in nanoseconds since New (at
// least 1). Under testing/synctest it is the bubble's fake clock.
func (r *Runtime) clock() int64 { return int64(time.Since(r.start)) + 1 }

// stampLocked makes event times non-decreasing in the machine's order: t was
// read before the lock was taken.
func (r *Runtime) stampLocked(t int64) int64 {
	if t < r.last {
		return r.last
	}
	r.last = t
	return t
}

// growLocked gives every registered model its pools entry.
func (r *Runtime) growLocked() {
	for len(r.models) < r.m.Len() {
		r.models = append(r.models, pools{})
	}
}

// ShuttingDown reports whether Shutdown has begun.
func (r *Runtime) ShuttingDown() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

// Stopping returns a channel closed when Shutdown begins.
func (r *Runtime) Stopping() <-chan struct{} { return r.stopping }

// Status returns the status of every model in registration order: one atomic
// snapshot taken under the scheduler lock, so no model is seen half-changed
// and all models are seen at one instant.
func (r *Runtime) Status() []core.ModelStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Snapshot()
}

// StatusOf returns the status of model id, or an ErrNotFound *Error.
func (r *Runtime) StatusOf(id string) (core.ModelStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.m.Lookup(id)
	if !ok {
		return core.ModelStatus{}, rejectError(id, core.CodeNotFound, nil)
	}
	return r.m.Status(h), nil
}

// ConfigOf returns the committed config of model id and its version, read
// with its status in one critical section, or an ErrNotFound *Error.
func (r *Runtime) ConfigOf(id string) (core.Config, core.ModelStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.m.Lookup(id)
	if !ok {
		return core.Config{}, core.ModelStatus{}, rejectError(id, core.CodeNotFound, nil)
	}
	return r.m.Config(h), r.m.Status(h), nil
}

// Residency returns the resident models and the memory charged to them.
func (r *Runtime) Residency() (models int, memoryMB int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Residency()
}

// Describe returns the machine's readable state (core.Machine.Describe), for
// logs and test failures.
func (r *Runtime) Describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Describe()
}

// MutantsEnv names the environment variable that switches planted core bugs
// on (comma-separated names of core.AllMutants, or "none"), so the
// conformance suite can show that it fails against a mutated server. Only a
// build with the sluice_mutants tag reads it (mutants_on.go); any other
// build ignores it.
const MutantsEnv = "SLUICE_MUTANTS"

// ParseMutants parses a comma-separated list of mutant names.
func ParseMutants(s string) (core.Mutants, error) {
	var mu core.Mutants
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" || name == "none" {
			continue
		}
		x, ok := core.ParseMutant(name)
		if !ok {
			return 0, fmt.Errorf("unknown mutant %q", name)
		}
		mu |= x
	}
	return mu, nil
}
