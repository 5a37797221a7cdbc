package core

import "fmt"

// State is the lifecycle state of one registered model (CONTRACT.md, "States
// and ownership").
type State uint8

// The model states. The process-wide shutdown phase is not a model state; see
// Machine.ShuttingDown.
const (
	Unloaded      State = iota // registered metadata, no published pool
	Loading                    // a private pool is being built
	Ready                      // a complete pool is published
	Reconfiguring              // an exclusive manager is replacing the configuration
	Unloading                  // logical residency cleared, teardown in progress
)

var stateNames = [...]string{"unloaded", "loading", "ready", "reconfiguring", "unloading"}

// String returns the state's name as the HTTP status reports it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// Op is the operation of a manager ticket.
type Op uint8

// The manager operations. OpApply registers an unknown ID or reconfigures a
// known one, then loads it (HTTP PUT /v1/models/{id}).
const (
	OpNone   Op = iota
	OpApply     // register or reconfigure, then load
	OpLoad      // load if not loaded
	OpUnload    // unload, idempotent
	OpBulk      // bulk unload: the parent ticket of per-model members
	// OpUnregister unloads a known ID like OpUnload, then leaves a tombstone
	// (DELETE /v1/models/{id}): the entry keeps its version and handle, every
	// ticket queued behind it is answered not_found, and a later OpApply
	// re-registers it past its last version (CONTRACT.md unreg.*).
	OpUnregister
)

var opNames = [...]string{"none", "apply", "load", "unload", "bulk", "unregister"}

// String returns the operation's name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// Code is the outcome carried by a Reject effect. The server maps each code to
// one HTTP status once (see server).
type Code uint8

// The outcome codes.
const (
	CodeOK           Code = iota
	CodeServerBusy        // 503 server_busy: admission timeout, full queue, overdue blockers, residency refusal
	CodeShuttingDown      // 503 shutting_down
	CodeInvalid           // 400 invalid_request_error: bad config, unsupported slot count
	CodeNotFound          // 404 not_found_error
	CodeBackend           // 500 internal_error: load, probe or clone failed
	CodeCancelled         // the client went away; nobody reads the answer
)

var codeNames = [...]string{"ok", "server_busy", "shutting_down", "invalid_request", "not_found", "backend_error", "cancelled"}

// String returns the code's name.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", c)
}

// Reason says why a ticket is cancelled.
type Reason uint8

// The cancellation reasons.
const (
	ReasonTimeout    Reason = iota + 1 // the admission deadline passed: 503 server_busy
	ReasonDisconnect                   // the client went away
)

// String returns the reason's name.
func (r Reason) String() string {
	switch r {
	case ReasonTimeout:
		return "timeout"
	case ReasonDisconnect:
		return "disconnect"
	}
	return fmt.Sprintf("reason(%d)", r)
}

// Handle names a registry entry. Entries are never erased (an unregistered
// model leaves a tombstone that a re-registration of its ID reuses), so a
// handle stays valid for the machine's life.
type Handle uint32

// NoModel is the Model of effects for tickets that never reached a
// registered model (unknown ID, invalid spec, bulk parents).
const NoModel Handle = ^Handle(0)

// Ticket names one request, manager or bulk unload from submission to its
// terminal effect. The low 32 bits index the ticket table, the high 32 bits
// are a generation, so a stale or repeated Release is detected.
type Ticket uint64

// Job names one backend step (load, clone, probe, teardown) that the machine
// asked for. Completion events carry it back; a stale job is refused.
type Job uint64

// MaxSlots is the largest slot count the contract allows.
const MaxSlots = 16

// MaxBaseVersion bounds Config.BaseVersion, leaving room for every later
// reconfigure to count on without wrapping.
const MaxBaseVersion = 1 << 62

// The ranges of the sizes and durations a Config and Options may carry.
// Every input is bounded where it enters, so the ledger and deadline
// arithmetic (sums of MemoryMB, now+timeout) can never wrap an int64
// (CONTRACT.md res.ledger-bounds, fail.spec-bounds).
const (
	// MaxMemoryMB bounds one pool's memory estimate and the memory budget:
	// 2^40 MB (one exbibyte), beyond any device; 2^23 such pools still sum
	// inside an int64.
	MaxMemoryMB int64 = 1 << 40
	// MaxTimeout bounds every admission timeout, default, ceiling and the
	// idle timeout (nanoseconds): one year, so now+timeout cannot wrap.
	MaxTimeout int64 = 365 * 24 * 3600 * 1e9
	// MaxQueueLimit bounds a model's max_queue.
	MaxQueueLimit = 1 << 20
	// MaxLoadedLimit bounds Options.MaxLoadedModels.
	MaxLoadedLimit = 1 << 20
)

// NoTimeout in a timeout field means "not set: use the next default" (the
// model's for a request, the server's for a model).
const NoTimeout int64 = -1

// Config is the committed metadata of a model: what its pool is built from
// and how it admits work. A Config is immutable once submitted: the machine
// keeps the pointer and replaces it whole, so metadata is never a partial mix.
type Config struct {
	Task       string // e.g. "tts", "asr", "vad"
	Engine     string // backend name
	Checkpoint string // checkpoint path under the models root
	Options    string // canonical JSON of engine options
	Slots      int    // 1..MaxSlots, limited by the engine's capacity
	// AdmissionTimeout is the model's admission wait in nanoseconds: NoTimeout
	// (-1) uses Options.DefaultAdmissionTimeout, 0 means unbounded; either is
	// still limited by Options.AdmissionCeiling.
	AdmissionTimeout int64
	// MaxQueue limits queued requests (including those waiting for slots of a
	// loaded model); 0 means unlimited.
	MaxQueue int
	// MemoryMB is the engine's estimate of the resident memory of the whole
	// pool, charged against Options.MemoryBudgetMB from load start until
	// teardown completes.
	MemoryMB int64
	// Aliases are the model's other names, sorted and comma-separated
	// (core/runtime's names.go checks and resolves them): metadata the
	// machine only carries, so a change of aliases alone commits a new
	// version without rebuilding the pool.
	Aliases string
	// VoiceMap maps OpenAI's stock voice names to voices of a speech
	// model: a canonical JSON object, keys sorted ("" for none; see
	// core/runtime's CanonicalVoiceMap). Metadata the machine only
	// carries, as Aliases: the speech route reads it.
	VoiceMap string

	// BaseVersion and RegisterOnly matter only to an OpApply that registers
	// an unknown ID, which is how the server's persistent registry restores
	// a model (server/internal/registry, CONTRACT.md persist.version-continues):
	// the entry starts at config version BaseVersion (0 means 1) and, with
	// RegisterOnly, stays unloaded instead of loading. The machine commits
	// the config without them and a reconfigure ignores them, so they never
	// make two configs differ. The spec and the model checker only ever
	// register at version 1 with a load.
	BaseVersion  uint64
	RegisterOnly bool
}

// registration returns c without its registration-only fields.
func (c *Config) registration() *Config {
	if c.BaseVersion == 0 && !c.RegisterOnly {
		return c
	}
	cp := *c
	cp.BaseVersion, cp.RegisterOnly = 0, false
	return &cp
}

// SessionKey reports whether two configs build identical sessions, so that a
// live advertised capacity can be reused instead of probing.
func (c *Config) sameSessions(o *Config) bool {
	return c.Engine == o.Engine && c.Checkpoint == o.Checkpoint && c.Options == o.Options && c.Task == o.Task
}

// Validate checks what the machine can check of a config.
func (c *Config) Validate() error {
	if c == nil {
		return fmt.Errorf("config: missing")
	}
	if c.Slots < 1 || c.Slots > MaxSlots {
		return fmt.Errorf("config: slots must be 1..%d, got %d", MaxSlots, c.Slots)
	}
	if c.AdmissionTimeout < NoTimeout || c.AdmissionTimeout > MaxTimeout {
		return fmt.Errorf("config: admission timeout must be NoTimeout or 0..%d ns, got %d", MaxTimeout, c.AdmissionTimeout)
	}
	if c.MaxQueue < 0 || c.MaxQueue > MaxQueueLimit {
		return fmt.Errorf("config: max queue must be 0..%d, got %d", MaxQueueLimit, c.MaxQueue)
	}
	if c.MemoryMB < 0 || c.MemoryMB > MaxMemoryMB {
		return fmt.Errorf("config: memory estimate must be 0..%d MB, got %d", MaxMemoryMB, c.MemoryMB)
	}
	if c.BaseVersion > MaxBaseVersion {
		return fmt.Errorf("config: base version must be at most %d", uint64(MaxBaseVersion))
	}
	return nil
}

// Options are the machine-wide settings. The zero value is valid: no residency
// limits, no idle retirement, unbounded admission, parallel cold loads.
type Options struct {
	// MaxLoadedModels limits physically resident models (a model being torn
	// down still counts); 0 means unlimited.
	MaxLoadedModels int
	// MemoryBudgetMB limits the sum of Config.MemoryMB of resident models; a
	// model that is still tearing down counts until TeardownDone; 0 means
	// unlimited.
	MemoryBudgetMB int64
	// IdleTimeout retires a ready model that has been idle and queue-free this
	// long (nanoseconds, checked on Tick); 0 disables idle retirement.
	IdleTimeout int64
	// DefaultAdmissionTimeout applies when neither the request nor the model
	// sets one (nanoseconds; 0 means unbounded).
	DefaultAdmissionTimeout int64
	// AdmissionCeiling bounds every effective admission timeout, including
	// "unbounded" ones (nanoseconds; 0 means no ceiling). Bulk waits ignore it.
	AdmissionCeiling int64
	// LoadBackoff is the first backoff after a failed load (nanoseconds;
	// 0 disables the backoff): while a model backs off, a request that
	// would start its load is refused server_busy with the remaining time
	// (CONTRACT.md fail.load-backoff). Each further failure doubles it, up
	// to LoadBackoffMax; a successful load or a granted manager ends it, and
	// so does the first Tick at or after its end (NextDeadline names it).
	LoadBackoff int64
	// LoadBackoffMax caps the doubled backoff (nanoseconds; 0 or below
	// LoadBackoff: LoadBackoff).
	LoadBackoffMax int64
	// SerializeColdLoads lets at most one load run at a time (the global
	// cold-load guard); warm models keep serving meanwhile.
	SerializeColdLoads bool
	// Mutants switches on planted bugs for the mutation checks; only a build
	// with the sluice_mutants tag accepts it (MutantsBuilt).
	Mutants Mutants

	_ struct{}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.MaxLoadedModels < 0 || o.MaxLoadedModels > MaxLoadedLimit {
		return fmt.Errorf("options: max loaded models must be 0..%d, got %d", MaxLoadedLimit, o.MaxLoadedModels)
	}
	if o.MemoryBudgetMB < 0 || o.MemoryBudgetMB > MaxMemoryMB {
		return fmt.Errorf("options: memory budget must be 0..%d MB, got %d", MaxMemoryMB, o.MemoryBudgetMB)
	}
	for _, d := range []struct {
		name string
		v    int64
	}{{"idle timeout", o.IdleTimeout}, {"default admission timeout", o.DefaultAdmissionTimeout},
		{"admission ceiling", o.AdmissionCeiling},
		{"load backoff", o.LoadBackoff}, {"load backoff cap", o.LoadBackoffMax}} {
		if d.v < 0 || d.v > MaxTimeout {
			return fmt.Errorf("options: %s must be 0..%d ns, got %d", d.name, MaxTimeout, d.v)
		}
	}
	if o.Mutants != 0 && !mutantsBuilt {
		return fmt.Errorf("options: planted bugs (%s) need a build with -tags sluice_mutants", o.Mutants)
	}
	return nil
}
