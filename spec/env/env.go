// Package env is the bounded environment of the model checker: which events
// the clients, the backends and the operator may cause in a state, within a
// budget per kind. The same labels drive the spec transcription and the real
// core, so both are explored inside one environment.
//
// Time is abstract. Events happen one nanosecond apart; every admission
// deadline is far beyond any explored run, so a timeout is the
// nondeterministic event Cancel(ReasonTimeout) of a queued ticket that has a
// deadline, and the overdue fail-fast of SubmitRequest never fires in the
// core (the spec still allows it). A Tick jumps the clock by
// Options.IdleTimeout, so it retires every idle model at once.
//
// Threading rule: a Bound is read-only once built; labels and budgets are
// values.
package env

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// Time constants of the abstract clock (nanoseconds).
const (
	// BigTimeout is the admission timeout of a bounded ticket: longer than
	// any explored run, so only Cancel(ReasonTimeout) ends the wait.
	BigTimeout int64 = 1 << 50
	// IdleTimeout is Options.IdleTimeout when a bound has Ticks.
	IdleTimeout int64 = 1 << 30
	// LoadBackoff is Options.LoadBackoff of the bounds that back off: longer
	// than any explored run, shorter than the time a Tick skips, so a load
	// backoff lasts until the next Tick ends it.
	LoadBackoff int64 = 1 << 20
)

// Capacity choices of a LoadDone or ProbeDone.
const (
	CapHigh uint8 = iota // the bound's Capacity: enough for any config
	CapLow               // one below the slots asked for: invalid_request
)

// Label is one environment event, small enough to store for every state.
// Tickets are named by their number; a submission's Ticket is filled in
// with the number it got when the label is applied.
type Label struct {
	Kind    core.EventKind // 0 for a root: Model is then the initial state's index
	Model   uint8          // index into Bound.Models
	Op      core.Op
	Cfg     uint8 // index into Bound.Configs
	Bounded bool  // the ticket has an admission deadline
	Reason  core.Reason
	Failed  bool
	Cap     uint8 // CapHigh or CapLow
	Sel     uint8 // index into Bound.Selections
	Fair    bool  // a weakly fair event: Release, or a backend completion
	Alt     uint8 // which of the spec's outcomes (spec runs only)
	// Clone, for a LoadDone of a bound with MergeBuild, is the clone that
	// fails (1-based), or 0 when every clone succeeds.
	Clone  uint8
	Ticket uint64
}

// Bound is one bounded environment.
type Bound struct {
	Name       string
	Models     []string       // the model universe
	Registered int            // models registered (and unloaded) in the initial state
	Warm       bool           // also start from states where the first k models are ready
	Configs    []*core.Config // [0] registers, the others are reconfigure targets
	// Table interns the abstract configs of everything exploring this
	// bound (the spec, the abstracted core), so their state keys agree;
	// required (abstract.NewConfigTable). A copy of the bound shares it.
	Table *abstract.ConfigTable
	// InitConfigs gives the config index each registered model starts with
	// (default 0); those indexes are never reconfigure targets.
	InitConfigs []uint8
	Options     core.Options // limits and guard; IdleTimeout is set when Ticks > 0

	Requests, Applies, Loads, Unloads, AnyManagers int
	// Unregisters bounds the OpUnregister managers (DELETE /v1/models/{id});
	// AnyManagers never spends on one. A re-registration of a tombstone is
	// an apply with the model's initial config (Applies or AnyManagers).
	Unregisters int
	// RequestModels, when set, are the only models requests go to (indexes
	// into Models); managers and bulk unloads still reach every model.
	RequestModels []int
	// MaxLiveRequests, when set, bounds the requests submitted and not yet
	// ended at any moment (clients in flight); Requests bounds them in all.
	MaxLiveRequests          int
	Bulks                    int
	Selections               [][]int // bulk selections, as indexes into Models
	Cancels, Failures, Ticks int
	Shutdown                 bool // BeginShutdown may happen
	StaleRelease             bool // a shell may repeat a Release (ErrUnknownTicket)
	// BoundedRequests and BoundedManagers give every request (every targeted
	// manager) an admission deadline, so its wait may end in a timeout. A
	// ticket without one could only be disconnected instead, which changes
	// the state in the same way; only the answer's code differs.
	BoundedRequests, BoundedManagers bool
	Capacity                         int // the advertised capacity of CapHigh

	// MergeBuild completes a whole private build (LoadDone, then every
	// CloneDone) as one label: the clones of a private pool touch nothing
	// another event reads (the build's own progress), so they commute with
	// every other event and need not interleave with them. Core only.
	MergeBuild bool

	Symmetry bool // canonical keys sort models within their SymmetryClasses
	Liveness bool // keep the graph and look for cycles
	// LabelAll labels every client and every model, also those
	// interchangeable with an earlier one (see sameWaiter and the core
	// system's twins): it cross-checks those transition reductions.
	LabelAll bool

	_ struct{}
}

// Budget is what the environment may still do.
type Budget struct {
	Requests, Applies, Loads, Unloads, AnyManagers, Unregisters, Bulks, Cancels, Failures, Ticks int8
	Shutdown                                                                                     bool
}

// Start returns the full budget of b.
func (b *Bound) Start() Budget {
	return Budget{Requests: int8(b.Requests), Applies: int8(b.Applies), Loads: int8(b.Loads), Unloads: int8(b.Unloads),
		AnyManagers: int8(b.AnyManagers), Unregisters: int8(b.Unregisters), Bulks: int8(b.Bulks), Cancels: int8(b.Cancels), Failures: int8(b.Failures),
		Ticks: int8(b.Ticks), Shutdown: b.Shutdown}
}

// AppendKey appends the budget to a state key.
func (u Budget) AppendKey(k []byte) []byte {
	return append(k, byte(u.Requests), byte(u.Applies), byte(u.Loads), byte(u.Unloads), byte(u.AnyManagers),
		byte(u.Unregisters), byte(u.Bulks), byte(u.Cancels), byte(u.Failures), byte(u.Ticks), boolByte(u.Shutdown))
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// MachineOptions returns the core options of b.
func (b *Bound) MachineOptions() core.Options {
	o := b.Options
	if b.Ticks > 0 && o.IdleTimeout == 0 {
		o.IdleTimeout = IdleTimeout
	}
	return o
}

// Params returns the spec constants of b.
func (b *Bound) Params() *abstract.Params {
	p := abstract.ParamsOf(b.MachineOptions())
	return &p
}

// Config returns the abstract config with index k.
func (b *Bound) Config(k uint8) *abstract.Config { return b.Table.FromCore(b.Configs[k]) }

func (b *Bound) mgrBudget(u *Budget, op core.Op) bool {
	switch {
	case op == core.OpUnregister:
		if u.Unregisters <= 0 {
			return false
		}
		u.Unregisters--
	case op == core.OpApply && u.Applies > 0:
		u.Applies--
	case op == core.OpLoad && u.Loads > 0:
		u.Loads--
	case op == core.OpUnload && u.Unloads > 0:
		u.Unloads--
	case u.AnyManagers > 0:
		u.AnyManagers--
	default:
		return false
	}
	return true
}

// Consume returns the budget left after l.
func (b *Bound) Consume(u Budget, l Label) Budget {
	switch l.Kind {
	case core.EvSubmitRequest:
		u.Requests--
	case core.EvSubmitManager:
		b.mgrBudget(&u, l.Op)
	case core.EvSubmitBulkUnload:
		u.Bulks--
	case core.EvCancel:
		u.Cancels--
	case core.EvLoadDone, core.EvProbeDone:
		if l.Failed || l.Cap == CapLow || l.Clone > 0 {
			u.Failures--
		}
	case core.EvCloneDone:
		if l.Failed {
			u.Failures--
		}
	case core.EvTick:
		u.Ticks--
	case core.EvBeginShutdown:
		u.Shutdown = false
	}
	return u
}

// Enabled returns the labels the environment may cause in s with budget u.
// Every label that is weakly fair has Fair set.
func (b *Bound) Enabled(s *abstract.State, u Budget, out []Label) []Label {
	out = out[:0]
	liveReq := 0
	for i := range s.Models {
		liveReq += len(s.Models[i].Holders) + s.Models[i].QueuedRequests()
	}
	canRequest := u.Requests > 0 && (b.MaxLiveRequests == 0 || liveReq < b.MaxLiveRequests)
	for mi, id := range b.Models {
		i := s.Lookup(id)
		if canRequest && i >= 0 && b.requestsTo(mi) {
			out = append(out, Label{Kind: core.EvSubmitRequest, Model: uint8(mi), Bounded: b.BoundedRequests})
		}
		for _, op := range []core.Op{core.OpApply, core.OpLoad, core.OpUnload, core.OpUnregister} {
			if probe := u; !b.mgrBudget(&probe, op) {
				continue
			}
			var cfgs []uint8
			switch {
			case op == core.OpApply && i < 0:
				cfgs = []uint8{b.InitConfig(mi)}
			case op == core.OpApply:
				for k := 1; k < len(b.Configs); k++ {
					if !b.isInit(uint8(k)) {
						cfgs = append(cfgs, uint8(k))
					}
				}
			case i >= 0:
				cfgs = []uint8{0}
			}
			for _, c := range cfgs {
				out = append(out, Label{Kind: core.EvSubmitManager, Model: uint8(mi), Op: op, Cfg: c,
					Bounded: b.BoundedManagers && i >= 0})
			}
		}
	}
	if u.Bulks > 0 {
		for k := range b.Selections {
			out = append(out, Label{Kind: core.EvSubmitBulkUnload, Sel: uint8(k)})
		}
	}
	for i := range s.Models {
		md := &s.Models[i]
		mi := uint8(b.modelIndex(md.ID))
		if u.Cancels > 0 {
			for k, e := range md.Queue {
				if e.Kind == abstract.KMember || (!b.LabelAll && k > 0 && sameWaiter(md, &md.Queue[k-1], &e)) {
					continue
				}
				r := core.ReasonDisconnect
				if e.Bounded {
					r = core.ReasonTimeout
				}
				out = append(out, Label{Kind: core.EvCancel, Model: mi, Ticket: e.ID, Reason: r})
			}
			for k, h := range md.Holders {
				if h.Wait && (b.LabelAll || !sameHolderBefore(md, k)) {
					out = append(out, Label{Kind: core.EvCancel, Model: mi, Ticket: h.ID, Reason: core.ReasonDisconnect})
				}
			}
		}
		for k, h := range md.Holders {
			if !h.Wait && (b.LabelAll || !sameHolderBefore(md, k)) {
				out = append(out, Label{Kind: core.EvRelease, Model: mi, Ticket: h.ID, Fair: true})
			}
		}
		fail := u.Failures > 0
		switch md.Job {
		case abstract.JLoad, abstract.JProbe:
			k := core.EvLoadDone
			if md.Job == abstract.JProbe {
				k = core.EvProbeDone
			}
			out = append(out, Label{Kind: k, Model: mi, Cap: CapHigh, Fair: true})
			if fail {
				out = append(out, Label{Kind: k, Model: mi, Cap: CapLow, Fair: true},
					Label{Kind: k, Model: mi, Failed: true, Fair: true})
				if b.MergeBuild && md.Job == abstract.JLoad {
					for c := 1; c < md.Cfg.Slots; c++ {
						out = append(out, Label{Kind: k, Model: mi, Cap: CapHigh, Clone: uint8(c), Fair: true})
					}
				}
			}
		case abstract.JClone:
			out = append(out, Label{Kind: core.EvCloneDone, Model: mi, Fair: true})
			if fail {
				out = append(out, Label{Kind: core.EvCloneDone, Model: mi, Failed: true, Fair: true})
			}
		case abstract.JTeardown:
			out = append(out, Label{Kind: core.EvTeardownDone, Model: mi, Fair: true})
		}
	}
	if u.Cancels > 0 {
		for _, bk := range s.Bulks {
			out = append(out, Label{Kind: core.EvCancel, Ticket: bk.ID, Reason: core.ReasonDisconnect})
		}
	}
	if u.Ticks > 0 {
		out = append(out, Label{Kind: core.EvTick})
	}
	if u.Shutdown && !s.Shutdown {
		out = append(out, Label{Kind: core.EvBeginShutdown})
	}
	if b.StaleRelease && len(s.Models) > 0 {
		out = append(out, Label{Kind: core.EvRelease}) // Ticket 0: a repeated Release of a finished lease
	}
	return out
}

func (b *Bound) requestsTo(mi int) bool {
	if len(b.RequestModels) == 0 {
		return true
	}
	for _, x := range b.RequestModels {
		if x == mi {
			return true
		}
	}
	return false
}

func (b *Bound) isInit(k uint8) bool {
	for _, x := range b.InitConfigs {
		if x == k {
			return true
		}
	}
	return false
}

// InitConfig returns the config index model i registers with.
func (b *Bound) InitConfig(i int) uint8 {
	if i < len(b.InitConfigs) {
		return b.InitConfigs[i]
	}
	return 0
}

// TicketName prints a ticket number as index.generation (core's slab
// layout), shorter than the raw 64-bit number.
func TicketName(t uint64) string { return fmt.Sprintf("t%d.%d", uint32(t), t>>32) }

func (b *Bound) modelIndex(id string) int {
	for k, x := range b.Models {
		if x == id {
			return k
		}
	}
	panic(fmt.Sprintf("env: model %q outside the universe", id))
}

// CapacityFor returns the advertised capacity of a completion label for a
// model whose relevant config (the committed one for a load, the
// replacement for a probe) asks for slots.
func (b *Bound) CapacityFor(l Label, slots int) int {
	if l.Cap == CapLow {
		return slots - 1
	}
	return b.Capacity
}

// Action returns the spec action of l in state s (tickets of submissions
// get l.Ticket when set).
func (b *Bound) Action(s *abstract.State, l Label) abstract.Action {
	a := abstract.Action{Kind: l.Kind, Ticket: l.Ticket, Reason: l.Reason, Failed: l.Failed, Timeout: core.NoTimeout}
	// Event times: the spec keeps its own clock (State.Clock); a refinement
	// check sets Now to the core event's time.
	if l.Kind != core.EvSubmitBulkUnload && l.Kind != core.EvTick && l.Kind != core.EvBeginShutdown {
		a.Model = b.Models[l.Model]
	}
	if l.Bounded {
		a.Timeout = BigTimeout
	}
	switch l.Kind {
	case core.EvSubmitManager:
		a.Op = l.Op
		if l.Op == core.OpApply {
			a.Cfg = b.Config(l.Cfg)
		}
	case core.EvSubmitBulkUnload:
		for _, k := range b.Selections[l.Sel] {
			a.Models = append(a.Models, b.Models[k])
		}
	case core.EvLoadDone:
		a.Capacity = b.CapacityFor(l, s.Models[s.Lookup(a.Model)].Cfg.Slots)
	case core.EvProbeDone:
		i := s.Lookup(a.Model)
		a.Capacity = b.CapacityFor(l, s.Models[i].Mgr.Cfg.Slots)
	}
	return a
}

// Describe prints a label readably.
func (b *Bound) Describe(l Label) string {
	var sb strings.Builder
	sb.WriteString(l.Kind.String())
	m := ""
	if int(l.Model) < len(b.Models) {
		m = b.Models[l.Model]
	}
	switch l.Kind {
	case core.EvSubmitRequest:
		fmt.Fprintf(&sb, " %s", m)
	case core.EvSubmitManager:
		fmt.Fprintf(&sb, " %s op=%s", m, l.Op)
		if l.Op == core.OpApply {
			c := b.Configs[l.Cfg]
			fmt.Fprintf(&sb, " config=%d(slots=%d options=%s)", l.Cfg, c.Slots, c.Options)
		}
	case core.EvSubmitBulkUnload:
		var ids []string
		for _, k := range b.Selections[l.Sel] {
			ids = append(ids, b.Models[k])
		}
		fmt.Fprintf(&sb, " [%s]", strings.Join(ids, " "))
	case core.EvCancel:
		fmt.Fprintf(&sb, " %s reason=%s", TicketName(l.Ticket), l.Reason)
	case core.EvRelease:
		if l.Ticket == 0 {
			sb.WriteString(" ticket=<stale>")
		} else {
			fmt.Fprintf(&sb, " %s %s", m, TicketName(l.Ticket))
		}
	case core.EvLoadDone, core.EvProbeDone:
		fmt.Fprintf(&sb, " %s", m)
		switch {
		case l.Failed:
			sb.WriteString(" failed")
		case l.Cap == CapLow:
			sb.WriteString(" capacity<slots")
		default:
			fmt.Fprintf(&sb, " capacity=%d", b.Capacity)
			if b.MergeBuild && l.Kind == core.EvLoadDone {
				if l.Clone > 0 {
					fmt.Fprintf(&sb, ", then clones until clone #%d fails", l.Clone)
				} else {
					sb.WriteString(", then every clone")
				}
			}
		}
	case core.EvCloneDone:
		fmt.Fprintf(&sb, " %s", m)
		if l.Failed {
			sb.WriteString(" failed")
		}
	case core.EvTeardownDone:
		fmt.Fprintf(&sb, " %s", m)
	}
	if (l.Kind == core.EvSubmitRequest || l.Kind == core.EvSubmitManager) && l.Bounded {
		sb.WriteString(" with deadline")
	}
	if l.Ticket != 0 && (l.Kind == core.EvSubmitRequest || l.Kind == core.EvSubmitManager || l.Kind == core.EvSubmitBulkUnload) {
		fmt.Fprintf(&sb, " -> %s", TicketName(l.Ticket))
	}
	return sb.String()
}
