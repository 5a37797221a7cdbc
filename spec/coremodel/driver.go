// Package coremodel drives the real core.Machine inside the bounded
// environment of package env: it turns labels into core events on an
// abstract clock, keeps the shell-side knowledge a runtime would keep (which
// ticket asked for what, which bulk a barrier belongs to, which job runs),
// checks that every ticket gets exactly one answer, and provides the
// abstraction function from core states to spec states and the canonical
// key of a core state.
//
// A state is copied by Clone (core's exact (*core.Machine).Clone and the
// shell's bookkeeping) or rebuilt by replaying the labels that reached it
// (Replay, the reference); replay is deterministic because ticket and job
// numbers are.
//
// Threading rule: a Driver owns its machine and is used by one goroutine.
package coremodel

import (
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
	"github.com/sluice-dev/sluice/spec/env"
)

// Ticket is what the driver knows about a live ticket it submitted.
type Ticket struct {
	Kind    abstract.Kind
	Op      core.Op
	Cfg     *core.Config
	Granted bool
}

// Bulk is a live bulk unload the driver submitted.
type Bulk struct {
	ID     core.Ticket
	Reason core.Reason
	Result *core.BulkResult
	Models []string // shared between copies: never changed
}

type liveTicket struct {
	id core.Ticket
	Ticket
}

type member struct {
	id, parent core.Ticket
}

type job struct {
	id   core.Job
	kind core.EffectKind
	cfg  *core.Config
	ok   bool // a job runs
}

// Driver is a core.Machine inside the bounded environment.
type Driver struct {
	B       *env.Bound
	M       *core.Machine
	Now     int64
	Budget  env.Budget
	Sent    bool          // ShutdownComplete was emitted
	Effects []core.Effect // the effects of the last label, copied
	Last    core.Event    // the core event of the last label
	// ExactKey keeps in the canonical key what core leaves dead (see
	// AppendKey); it is on whenever mutants are.
	ExactKey bool

	// The shell's bookkeeping is kept in small slices (a handful of live
	// tickets, one entry per model), which are cheap to copy.
	tickets []liveTicket // live request and manager tickets
	members []member     // bulk member -> parent, for live bulks
	bulks   []Bulk
	models  []modelShell // by handle
	// arena holds a clone's bookkeeping when it fits, so that Clone
	// allocates once for all of it (see inArena).
	arena struct {
		tickets [8]liveTicket
		members [4]member
		bulks   [2]Bulk
		models  [4]modelShell
	}
}

// modelShell is what the shell knows of one model.
type modelShell struct {
	job job
	// failCode: the answer a manager waiting for its failed build's
	// teardown will get (core keeps it privately; the shell knows which
	// failure it reported).
	failCode core.Code
}

// ticket returns the live ticket id, or nil. The pointer is valid until the
// next change of the ticket list.
func (d *Driver) ticket(id core.Ticket) *Ticket {
	for k := range d.tickets {
		if d.tickets[k].id == id {
			return &d.tickets[k].Ticket
		}
	}
	return nil
}

func (d *Driver) dropTicket(id core.Ticket) {
	for k := range d.tickets {
		if d.tickets[k].id == id {
			d.tickets = append(d.tickets[:k], d.tickets[k+1:]...)
			return
		}
	}
}

// job returns the job running on model h.
func (d *Driver) job(h core.Handle) (job, bool) {
	if int(h) < len(d.models) && d.models[h].job.ok {
		return d.models[h].job, true
	}
	return job{}, false
}

// shell returns the shell's record of model h.
func (d *Driver) shell(h core.Handle) *modelShell {
	for int(h) >= len(d.models) {
		d.models = append(d.models, modelShell{})
	}
	return &d.models[h]
}

func (d *Driver) failCodeOf(h core.Handle) core.Code {
	if int(h) < len(d.models) {
		return d.models[h].failCode
	}
	return 0
}

func (d *Driver) member(id core.Ticket) (core.Ticket, bool) {
	for _, x := range d.members {
		if x.id == id {
			return x.parent, true
		}
	}
	return 0, false
}

// New returns a driver on a fresh machine with the bound's options and the
// extra mutants.
func New(b *env.Bound, mutants core.Mutants) (*Driver, error) {
	o := b.MachineOptions()
	o.Mutants = mutants
	m, err := core.New(o)
	if err != nil {
		return nil, fmt.Errorf("coremodel: %w", err)
	}
	return &Driver{B: b, M: m, Now: 1000, Budget: b.Start()}, nil
}

// Replay returns a driver in the state reached by setup then path.
func Replay(b *env.Bound, mutants core.Mutants, setup, path []env.Label) (*Driver, error) {
	d, err := New(b, mutants)
	if err != nil {
		return nil, err
	}
	for _, l := range setup {
		if _, err := d.apply(l, false, CheckNone); err != nil {
			return nil, fmt.Errorf("coremodel: setup %s: %w", b.Describe(l), err)
		}
	}
	d.Budget = b.Start()
	for _, l := range path {
		if err := d.Redo(l); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Result is what applying one label did.
type Result struct {
	Label env.Label // with the ticket a submission got
	// Stutter: the machine refused the event as not applicable (a stale
	// ticket, a granted ticket that cannot be cancelled): nothing changed.
	Stutter bool
	// Discipline is a broken ticket rule: a second answer, an answer for an
	// unknown ticket, a cancelled ticket left unanswered, a release of a
	// finished lease that the machine accepted.
	Discipline error
	// Invariants is core.CheckInvariants after the event (nil when they hold).
	Invariants error
}

// Apply applies l to the machine, spending budget, and checks the tickets.
// A merged build (env.Bound.MergeBuild) must go through Micro instead.
func (d *Driver) Apply(l env.Label) (Result, error) { return d.apply(l, true, CheckAll) }

// Micro returns the core events that label l stands for: l itself, or for a
// merged build its LoadDone and then each CloneDone up to the publication
// or the failing clone.
func (d *Driver) Micro(l env.Label) []env.Label { return d.MicroInto(nil, l) }

// MicroInto is Micro appending to buf (the checker's step reuses one).
func (d *Driver) MicroInto(buf []env.Label, l env.Label) []env.Label {
	out := append(buf, l)
	if !d.B.MergeBuild || l.Kind != core.EvLoadDone || l.Failed || l.Cap == env.CapLow {
		return out
	}
	h, ok := d.M.Lookup(d.B.Models[l.Model])
	if !ok {
		return out
	}
	n := d.M.Config(h).Slots - 1
	if l.Clone > 0 {
		n = int(l.Clone)
	}
	for c := 1; c <= n; c++ {
		out = append(out, env.Label{Kind: core.EvCloneDone, Model: l.Model, Failed: c == int(l.Clone), Fair: true})
	}
	return out
}

// ApplyMicro applies one event of Micro(l); spend is true for the first.
func (d *Driver) ApplyMicro(l env.Label, spend bool) (Result, error) {
	return d.apply(l, spend, CheckAll)
}

// CheckMode says which of core's invariants apply checks after an event.
type CheckMode uint8

// The check modes.
const (
	CheckNone CheckMode = iota
	// CheckAll: core.CheckInvariants.
	CheckAll
	// CheckStep: only the invariants that read what the event did rather
	// than the state it left (EvictOnlyIdle reads what it retired); the
	// others are the caller's to check on the state (CheckStateInvariants).
	CheckStep
)

// ApplyMicroWith is ApplyMicro checking the invariants of mode.
func (d *Driver) ApplyMicroWith(l env.Label, spend bool, mode CheckMode) (Result, error) {
	return d.apply(l, spend, mode)
}

// stepInvariants are core's invariants that read the last event's doings
// (cleared by Advance); stateInvariants the others, which read only the
// machine's state and so hold or fail alike before and after Advance.
var stepInvariants, stateInvariants = splitInvariants()

func splitInvariants() (step, state []core.Invariant) {
	for _, inv := range core.Invariants() {
		if inv.Name == "EvictOnlyIdle" {
			step = append(step, inv)
		} else {
			state = append(state, inv)
		}
	}
	return step, state
}

// NumStateInvariants is how many invariants CheckStateInvariants checks.
var NumStateInvariants = len(stateInvariants)

// CheckStateInvariants checks core's invariants that read only the
// machine's state (every one but those CheckStep checks), as
// core.CheckInvariants reports them.
func (d *Driver) CheckStateInvariants() error { return checkInvariants(d.M, stateInvariants) }

func checkInvariants(m *core.Machine, invs []core.Invariant) error {
	var errs []error
	for _, inv := range invs {
		if err := inv.Check(m); err != nil {
			errs = append(errs, &core.InvariantError{Name: inv.Name, Detail: err.Error()})
		}
	}
	return errors.Join(errs...)
}

func (d *Driver) apply(l env.Label, spend bool, check CheckMode) (Result, error) {
	res := Result{Label: l}
	d.Now++
	if l.Kind == core.EvTick {
		d.Now += env.IdleTimeout
	}
	ev := core.Event{Kind: l.Kind, Now: d.Now, Timeout: core.NoTimeout, Ticket: core.Ticket(l.Ticket),
		Reason: l.Reason, Failed: l.Failed}
	if l.Bounded {
		ev.Timeout = env.BigTimeout
	}
	var h core.Handle
	var j job
	switch l.Kind {
	case core.EvSubmitRequest, core.EvSubmitManager:
		ev.Model = d.B.Models[l.Model]
		ev.Ticket = 0
		if l.Kind == core.EvSubmitManager {
			ev.Op = l.Op
			if l.Op == core.OpApply {
				ev.Config = d.B.Configs[l.Cfg]
			}
		}
	case core.EvSubmitBulkUnload:
		ev.Ticket = 0
		for _, k := range d.B.Selections[l.Sel] {
			ev.Models = append(ev.Models, d.B.Models[k])
		}
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		var ok bool
		if h, ok = d.M.Lookup(d.B.Models[l.Model]); !ok {
			return res, fmt.Errorf("coremodel: %s of unregistered %s", l.Kind, d.B.Models[l.Model])
		}
		if j, ok = d.job(h); !ok {
			return res, fmt.Errorf("coremodel: %s of %s: no job running", l.Kind, d.B.Models[l.Model])
		}
		ev.Job = j.id
		switch l.Kind {
		case core.EvLoadDone:
			ev.Capacity = d.B.CapacityFor(l, d.M.Config(h).Slots)
		case core.EvProbeDone:
			ev.Capacity = d.B.CapacityFor(l, j.cfg.Slots)
		}
	case core.EvBeginShutdown:
		d.markShutdownBulks()
	}
	d.Last = ev
	var tk core.Ticket
	var err error
	cancelled := false
	switch l.Kind {
	case core.EvCancel:
		cancelled, err = d.M.Cancel(ev.Now, ev.Ticket, ev.Reason)
	default:
		tk, err = d.M.Step(ev)
	}
	d.Effects = append(d.Effects[:0], d.M.Effects()...)
	switch check {
	case CheckAll:
		// Before Advance: EvictOnlyIdle reads what this event retired.
		res.Invariants = d.M.CheckInvariants()
	case CheckStep:
		res.Invariants = checkInvariants(d.M, stepInvariants)
	}
	d.M.Advance()
	if spend {
		d.Budget = d.B.Consume(d.Budget, l)
	}
	if err != nil {
		if errors.Is(err, core.ErrUnknownTicket) || errors.Is(err, core.ErrNotRunning) {
			res.Stutter = true
			if len(d.Effects) > 0 {
				res.Discipline = fmt.Errorf("refused %s emitted %d effects", l.Kind, len(d.Effects))
			}
			return res, nil
		}
		return res, fmt.Errorf("coremodel: %s: %w", d.B.Describe(l), err)
	}
	var disc []error
	bad := func(format string, args ...any) { disc = append(disc, fmt.Errorf(format, args...)) }
	switch l.Kind {
	case core.EvSubmitRequest, core.EvSubmitManager, core.EvSubmitBulkUnload:
		res.Label.Ticket = uint64(tk)
		if d.ticket(tk) != nil || d.bulk(tk) != nil {
			bad("submission got ticket %d, which is still live", tk)
		}
		switch l.Kind {
		case core.EvSubmitRequest:
			d.tickets = append(d.tickets, liveTicket{id: tk, Ticket: Ticket{Kind: abstract.KReq}})
		case core.EvSubmitManager:
			d.tickets = append(d.tickets, liveTicket{id: tk, Ticket: Ticket{Kind: abstract.KMgr, Op: ev.Op, Cfg: ev.Config}})
		default:
			d.bulks = append(d.bulks, Bulk{ID: tk, Result: d.bulkResult(ev.Models), Models: ev.Models})
		}
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
		d.models[h].job = job{}
	case core.EvRelease:
		t := d.ticket(ev.Ticket)
		if t == nil || !t.Granted {
			bad("Release of ticket %d, which holds no lease, was accepted", ev.Ticket)
		} else {
			d.dropTicket(ev.Ticket)
		}
	case core.EvCancel:
		if !cancelled {
			res.Stutter = true
		} else if b := d.bulk(ev.Ticket); b != nil {
			b.Reason = core.ReasonDisconnect
		}
	}
	for _, e := range d.Effects {
		switch e.Kind {
		case core.EfGrant:
			t := d.ticket(e.Ticket)
			switch {
			case t == nil:
				bad("Grant for unknown ticket %d", e.Ticket)
			case t.Kind != abstract.KReq || t.Granted:
				bad("second answer (Grant) for ticket %d", e.Ticket)
			default:
				t.Granted = true
			}
		case core.EfReject, core.EfDone:
			if k := d.bulkIndex(e.Ticket); k >= 0 {
				d.bulks = append(d.bulks[:k], d.bulks[k+1:]...)
				d.dropMembers(e.Ticket)
				continue
			}
			t := d.ticket(e.Ticket)
			switch {
			case t == nil:
				bad("%s for unknown or finished ticket %d", e.Kind, e.Ticket)
			case t.Granted:
				bad("%s for ticket %d, which was granted", e.Kind, e.Ticket)
			case e.Kind == core.EfDone && t.Kind != abstract.KMgr:
				bad("Done for request ticket %d", e.Ticket)
			default:
				d.dropTicket(e.Ticket)
			}
		case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown:
			if old, ok := d.job(e.Model); ok {
				bad("%s for %s while job %d runs", e.Kind, d.M.ID(e.Model), old.id)
			}
			d.shell(e.Model).job = job{id: e.Job, kind: e.Kind, cfg: e.Config, ok: true}
			if e.Kind == core.EfStartTeardown && e.Cause == core.CauseFailedLoad {
				code := core.CodeBackend // a clone failed
				if l.Kind == core.EvLoadDone {
					code = core.CodeInvalid // the primary's capacity is below the slots
				}
				d.shell(e.Model).failCode = code
			}
		case core.EfShutdownComplete:
			if d.Sent {
				bad("second ShutdownComplete")
			}
			d.Sent = true
		}
	}
	if cancelled && l.Kind == core.EvCancel && d.bulk(ev.Ticket) == nil {
		if d.ticket(ev.Ticket) != nil {
			bad("Cancel of ticket %d reported it ended, but it got no answer", ev.Ticket)
		}
	}
	if l.Kind == core.EvSubmitBulkUnload {
		d.attributeMembers(tk)
	}
	if len(disc) > 0 {
		res.Discipline = errors.Join(disc...)
	}
	return res, nil
}

func (d *Driver) bulkIndex(id core.Ticket) int {
	for k, b := range d.bulks {
		if b.ID == id {
			return k
		}
	}
	return -1
}

func (d *Driver) bulk(id core.Ticket) *Bulk {
	if k := d.bulkIndex(id); k >= 0 {
		return &d.bulks[k]
	}
	return nil
}

// dropMembers forgets the members of a finished bulk: every one of them has
// finished before it.
func (d *Driver) dropMembers(p core.Ticket) {
	out := d.members[:0]
	for _, x := range d.members {
		if x.parent != p {
			out = append(out, x)
		}
	}
	clear(d.members[len(out):])
	d.members = out
}

// bulkResult is the contract's answer of a bulk unload: the registered
// selections in request order, deduplicated, and the unknown IDs.
func (d *Driver) bulkResult(ids []string) *core.BulkResult {
	res := &core.BulkResult{}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, ok := d.M.Lookup(id); ok {
			res.Unloaded = append(res.Unloaded, id)
		} else {
			res.NotFound = append(res.NotFound, id)
		}
	}
	return res
}

// attributeMembers records the parent of the barriers a bulk just queued.
func (d *Driver) attributeMembers(p core.Ticket) {
	if d.bulk(p) == nil {
		return
	}
	for h := 0; h < d.M.Len(); h++ {
		v := d.M.Inspect(core.Handle(h))
		for _, t := range v.Queue {
			if _, ok := d.member(t.Ticket); t.Member && !ok {
				d.members = append(d.members, member{id: t.Ticket, parent: p})
			}
		}
		if t := v.Manager; t != nil {
			if _, ok := d.member(t.Ticket); t.Member && !ok {
				d.members = append(d.members, member{id: t.Ticket, parent: p})
			}
		}
	}
}

// parentOf returns the bulk of a member barrier. A member the driver never
// saw queued (a barrier published late) belongs to the newest live bulk
// that selected its model.
func (d *Driver) parentOf(m core.Ticket, model string) core.Ticket {
	if p, ok := d.member(m); ok {
		return p
	}
	for k := len(d.bulks) - 1; k >= 0; k-- {
		for _, id := range d.bulks[k].Models {
			if id == model {
				d.members = append(d.members, member{id: m, parent: d.bulks[k].ID})
				return d.bulks[k].ID
			}
		}
	}
	return 0
}

// markShutdownBulks: a shutdown rejects queued barriers; their bulk then
// ends shutting_down unless a disconnect already decided it.
func (d *Driver) markShutdownBulks() {
	if len(d.bulks) == 0 || d.M.ShuttingDown() {
		return
	}
	for h := 0; h < d.M.Len(); h++ {
		v := d.M.Inspect(core.Handle(h))
		for _, t := range v.Queue {
			if !t.Member {
				continue
			}
			if b := d.bulk(d.parentOf(t.Ticket, v.ID)); b != nil && b.Reason == 0 {
				b.Reason = abstract.ReasonShutdown
			}
		}
	}
}
