package core

import (
	"fmt"
	"strings"
)

// TicketView is a read-only picture of one live ticket.
type TicketView struct {
	Ticket   Ticket
	Kind     string // "request", "manager", "bulk"
	Op       Op
	Phase    string // "queued", "wait_init", "running", "managing", "bulk"
	Seq      uint64 // enqueue order across the machine
	Slot     int    // -1 unless it holds a slot
	Version  uint64 // config version a running request is bound to
	Deadline int64
	Since    int64
	Member   bool // a bulk member barrier
}

// ModelView is a read-only picture of one registry entry, for tests, the
// model checker's abstraction function and the simulator.
type ModelView struct {
	Handle      Handle
	ID          string
	State       State
	Config      *Config
	Version     uint64
	Published   bool
	Capacity    int
	Sessions    int
	Built       int
	PoolVersion uint64
	Active      int
	WaitInit    int
	Queue       []TicketView // FIFO order
	Slots       []TicketView // admitted requests in slot order
	Manager     *TicketView  // the granted manager
	ManagerStep string
	Job         Job
	JobKind     string // "none", "load", "clone", "probe", "teardown"
	Cause       Cause  // of a running teardown
	InLoaders   bool
	Resident    bool
	ResidentMB  int64
	LastUsed    int64
	// BackoffUntil is when the model's load backoff ends (0: none).
	BackoffUntil int64
	// Unregistered marks a tombstone (see Machine.Unregistered).
	Unregistered bool
}

var kindNames = [...]string{"", "request", "manager", "bulk"}

func (m *Machine) ticketView(i int32) TicketView {
	t := &m.ts.t[i]
	v := TicketView{Ticket: m.ts.id(i), Kind: kindNames[t.kind], Op: t.op, Phase: phaseNames[t.phase], Seq: t.seq,
		Slot: -1, Version: t.version, Deadline: t.dead, Since: t.since, Member: t.parent >= 0}
	if t.phase == phWaitInit || t.phase == phRunning {
		v.Slot = int(t.slot)
	}
	return v
}

// Inspect returns a picture of model h.
func (m *Machine) Inspect(h Handle) ModelView {
	var v ModelView
	m.InspectInto(h, &v)
	return v
}

// InspectInto is Inspect into v, reusing the memory of v's Queue, Slots and
// Manager: what v held before is overwritten.
func (m *Machine) InspectInto(h Handle, v *ModelView) {
	md := &m.models[h]
	q, sl, mg := v.Queue[:0], v.Slots[:0], v.Manager
	*v = ModelView{Handle: h, ID: md.id, State: md.state, Config: md.cfg, Version: md.version, Published: md.published,
		Capacity: md.capacity, Sessions: md.sessions, Built: md.built, PoolVersion: md.poolVersion, Active: md.active,
		WaitInit: md.waitInit, ManagerStep: mstepNames[md.step], Job: md.job, JobKind: jobNames[md.jkind],
		Cause: md.cause, InLoaders: md.inLoaders, Resident: md.resident, ResidentMB: md.resMB, LastUsed: md.lastUsed,
		BackoffUntil: md.backoffUntil, Unregistered: md.gone}
	for i := md.head; i >= 0; i = m.ts.t[i].next {
		q = append(q, m.ticketView(i))
	}
	for b := md.busy; b != 0; b &= b - 1 {
		sl = append(sl, m.ticketView(md.slotT[trailing(b)]))
	}
	v.Queue, v.Slots = q, sl // nil from Inspect when empty; InspectInto keeps the memory
	if md.mgr >= 0 {
		if mg == nil {
			mg = new(TicketView)
		}
		*mg = m.ticketView(md.mgr)
		v.Manager = mg
	}
}

// Loaders returns the models waiting for the residency ledger or the
// cold-load guard, in FIFO order.
func (m *Machine) Loaders() []Handle { return append([]Handle(nil), m.loaders...) }

// LiveTickets returns the number of tickets that have not ended, including
// the internal per-model barriers of bulk unloads, which no client sees.
func (m *Machine) LiveTickets() int { return m.ts.live }

// JobsInFlight returns the number of backend jobs the machine waits for.
func (m *Machine) JobsInFlight() int { return m.jobs }

// Describe prints the machine's state in a stable, readable form, one model
// per line; datadriven tests print it as golden output.
func (m *Machine) Describe() string {
	var b strings.Builder
	for h := range m.models {
		v := m.Inspect(Handle(h))
		if v.Unregistered {
			fmt.Fprintf(&b, "%s: unregistered v%d\n", v.ID, v.Version)
			continue
		}
		fmt.Fprintf(&b, "%s: %s v%d slots=%d active=%d", v.ID, v.State, v.Version, v.Config.Slots, v.Active)
		if v.Published {
			fmt.Fprintf(&b, " pool=v%d/%d cap=%d", v.PoolVersion, v.Sessions, v.Capacity)
		}
		if v.WaitInit > 0 {
			fmt.Fprintf(&b, " wait_init=%d", v.WaitInit)
		}
		if v.Manager != nil {
			fmt.Fprintf(&b, " mgr=%s/%s", v.Manager.Op, v.ManagerStep)
		}
		if v.JobKind != "none" {
			fmt.Fprintf(&b, " job=%s", v.JobKind)
		}
		if v.InLoaders {
			b.WriteString(" waiting_residency")
		}
		if v.Resident {
			fmt.Fprintf(&b, " resident=%dMB", v.ResidentMB)
		}
		if len(v.Queue) > 0 {
			b.WriteString(" queue=[")
			for k, t := range v.Queue {
				if k > 0 {
					b.WriteByte(' ')
				}
				if t.Kind == "request" {
					b.WriteString("req")
				} else {
					b.WriteString(t.Op.String())
				}
			}
			b.WriteByte(']')
		}
		b.WriteByte('\n')
	}
	if m.shutdown {
		b.WriteString("shutting down\n")
	}
	return b.String()
}

// Describe prints one effect readably, naming models by ID.
func (m *Machine) DescribeEffect(e Effect) string {
	name := ""
	if e.Kind != EfShutdownComplete && int(e.Model) < len(m.models) {
		name = m.models[e.Model].id
	}
	switch e.Kind {
	case EfGrant:
		return fmt.Sprintf("Grant %s slot=%d v%d", name, e.Slot, e.Version)
	case EfReject:
		return fmt.Sprintf("Reject %s %s", name, e.Code)
	case EfDone:
		if e.Bulk != nil {
			return fmt.Sprintf("Done bulk unloaded=%v not_found=%v", e.Bulk.Unloaded, e.Bulk.NotFound)
		}
		return fmt.Sprintf("Done %s", name)
	case EfStartLoad:
		return fmt.Sprintf("StartLoad %s v%d", name, e.Version)
	case EfStartClone:
		return fmt.Sprintf("StartClone %s #%d", name, e.Index)
	case EfStartProbe:
		return fmt.Sprintf("StartProbe %s slots=%d", name, e.Config.Slots)
	case EfStartTeardown:
		return fmt.Sprintf("StartTeardown %s sessions=%d cause=%s", name, e.Sessions, e.Cause)
	case EfShutdownComplete:
		return "ShutdownComplete"
	case EfPublish:
		return fmt.Sprintf("Publish %s v%d sessions=%d capacity=%d", name, e.Version, e.Sessions, e.Capacity)
	case EfRetire:
		return fmt.Sprintf("Retire %s v%d sessions=%d cause=%s", name, e.Version, e.Sessions, e.Cause)
	}
	return e.Kind.String()
}
