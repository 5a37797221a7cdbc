package core

import "fmt"

// EventKind names an event. The names are the actions of spec/Scheduler.tla.
type EventKind uint8

// The events.
const (
	EvNone EventKind = iota
	EvSubmitRequest
	EvSubmitManager
	EvSubmitBulkUnload
	EvCancel
	EvRelease
	EvLoadDone
	EvCloneDone
	EvProbeDone
	EvTeardownDone
	EvTick
	EvBeginShutdown
)

var eventNames = [...]string{"None", "SubmitRequest", "SubmitManager", "SubmitBulkUnload", "Cancel", "Release",
	"LoadDone", "CloneDone", "ProbeDone", "TeardownDone", "Tick", "BeginShutdown"}

// EventNames lists the event names in declaration order (without None); the
// spec's name-consistency test compares them with Scheduler.tla.
func EventNames() []string { return append([]string(nil), eventNames[1:]...) }

// String returns the event's action name.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// Event is one input to the machine as a plain value, for replay, traces and
// the model checker. Only the fields of its kind are meaningful.
type Event struct {
	Kind EventKind
	Now  int64 // when it happened, in nanoseconds of the shell's monotonic clock

	Model   string   // SubmitRequest, SubmitManager
	Models  []string // SubmitBulkUnload
	Op      Op       // SubmitManager
	Config  *Config  // SubmitManager with OpApply
	Timeout int64    // SubmitRequest, SubmitManager: admission timeout override, NoTimeout for the default

	Ticket Ticket // Cancel, Release
	Reason Reason // Cancel
	Failed bool   // Release (inference failed), LoadDone, CloneDone, ProbeDone

	Job      Job // LoadDone, CloneDone, ProbeDone, TeardownDone
	Capacity int // LoadDone, ProbeDone: the advertised parallel capacity
}

// Step applies one event given as a value. For submissions it returns the new
// ticket. It is the same as calling the event's method.
func (m *Machine) Step(ev Event) (Ticket, error) {
	switch ev.Kind {
	case EvSubmitRequest:
		h, ok := m.Lookup(ev.Model)
		if !ok {
			return m.rejectUnknown(ev.Now), nil
		}
		return m.SubmitRequest(ev.Now, h, ev.Timeout), nil
	case EvSubmitManager:
		return m.SubmitManager(ev.Now, ev.Model, ev.Op, ev.Config, ev.Timeout), nil
	case EvSubmitBulkUnload:
		return m.SubmitBulkUnload(ev.Now, ev.Models), nil
	case EvCancel:
		_, err := m.Cancel(ev.Now, ev.Ticket, ev.Reason)
		return 0, err
	case EvRelease:
		return 0, m.Release(ev.Now, ev.Ticket, ev.Failed)
	case EvLoadDone:
		return 0, m.LoadDone(ev.Now, ev.Job, ev.Capacity, ev.Failed)
	case EvCloneDone:
		return 0, m.CloneDone(ev.Now, ev.Job, ev.Failed)
	case EvProbeDone:
		return 0, m.ProbeDone(ev.Now, ev.Job, ev.Capacity, ev.Failed)
	case EvTeardownDone:
		return 0, m.TeardownDone(ev.Now, ev.Job)
	case EvTick:
		m.Tick(ev.Now)
		return 0, nil
	case EvBeginShutdown:
		m.BeginShutdown(ev.Now)
		return 0, nil
	}
	return 0, fmt.Errorf("core: unknown event kind %d", ev.Kind)
}
