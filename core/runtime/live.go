package runtime

import (
	"encoding/json"
	"strings"
	"sync/atomic"

	"github.com/sluice-dev/sluice/core"
)

// liveWindow is how many events before a violation its log shows.
const liveWindow = 32

// liveSizeUnit: the interval between walks grows by every for each this
// many registry entries and live tickets, so that a walk, whose cost grows
// with them (BenchmarkCheckInvariants: about 160 ns with one model, 1.4 ms
// with 10,000 models and 10,000 waiters), costs about the same per event.
const liveSizeUnit = 8

// liveCheck checks core's invariants in production (Options.LiveInvariants)
// on a sampled schedule at a bounded cost: a full check (core.CheckInvariants
// walks every model and live ticket, and allocates nothing when they hold)
// once per every × max(1, (entries + live tickets) / liveSizeUnit) events
// of any kind. The walk's cost grows with the same sizes, so its share per
// event stays about constant (a few nanoseconds) whatever the traffic and
// the registry. The last liveWindow
// events are kept by value in a ring (a copy of an Event, no allocation),
// and a violation logs them as trace records, with the machine's state.
//
// Threading rule: everything but violations is guarded by Runtime.mu.
type liveCheck struct {
	every  int // 0: off
	hot    int // events since the last check
	due    int // the events the next check waits for: every, or more for a large state
	ring   [liveWindow]liveEvent
	next   uint64 // events seen; ring[next%liveWindow] is the oldest
	checks uint64 // walks done
	logged bool   // a violation was logged (each later one is only counted)

	violations atomic.Int64
}

// liveEvent is what the window keeps of one event: two words without
// pointers, so noting it is two stores and no write barrier (callgrind:
// noting the model's ID too cost 19 instructions an event, more than the
// sampled walks). what is the event's kind in the top 8 bits and, below,
// the low 56 bits of its ticket (Cancel, Release, a submission's new one)
// or job (a completion; a job names its model).
type liveEvent struct {
	what uint64
	now  int64
}

const liveIDBits = 56

// note puts ev in the window (small enough to inline into endLocked).
func (l *liveCheck) note(ev *core.Event, tk core.Ticket) {
	x := &l.ring[l.next%liveWindow]
	x.what = uint64(ev.Kind)<<liveIDBits | (uint64(ev.Ticket)|uint64(tk)|uint64(ev.Job))&(1<<liveIDBits-1)
	x.now = ev.Now
	l.next++
}

// liveLocked runs when hot reached due: the walk's turn, unless the
// registry and the live tickets make it dearer, and then every more events
// per liveSizeUnit of them.
func (r *Runtime) liveLocked(ev *core.Event) {
	l := &r.live
	if n := l.every * max(1, (r.m.Len()+r.m.LiveTickets())/liveSizeUnit); l.hot < n {
		l.due = n
		return
	}
	l.hot, l.due = 0, l.every
	l.checks++
	err := r.m.CheckInvariants() // before Advance: EvictOnlyIdle reads this event's victims
	if err == nil {
		return
	}
	l.violations.Add(1)
	if l.logged { // the first one's window says what went wrong; the rest are counted
		return
	}
	l.logged = true
	r.log.Error("core invariant broken: the scheduler goes on, but this is a bug; please report the events below",
		"after", ev.Kind.String(), "model", ev.Model, "err", err, "state", r.m.Describe(), "events", r.windowLocked())
}

// windowLocked renders the ring, oldest first, as ndjson trace records
// (core.Record, the --trace format) with each event's kind, time, and
// ticket or job (and the model a job names); the rest and the effects are
// not kept. With --trace the whole window is in the trace file at these
// times.
func (r *Runtime) windowLocked() string {
	l := &r.live
	var b strings.Builder
	start := uint64(0)
	if l.next > liveWindow {
		start = l.next - liveWindow
	}
	for i := start; i < l.next; i++ {
		x := &l.ring[i%liveWindow]
		id := x.what & (1<<liveIDBits - 1)
		ev := core.Event{Kind: core.EventKind(x.what >> liveIDBits), Now: x.now}
		tk := core.Ticket(0)
		switch ev.Kind {
		case core.EvSubmitRequest, core.EvSubmitManager, core.EvSubmitBulkUnload:
			tk = core.Ticket(id)
		case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
			ev.Job = core.Job(id)
			if h := core.Handle(id >> 32); int(h) < r.m.Len() {
				ev.Model = r.m.ID(h)
			}
		default:
			ev.Ticket = core.Ticket(id)
		}
		line, err := json.Marshal(core.EventRecord(ev, tk))
		if err != nil {
			continue
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// InvariantViolations counts the events after which a live check
// (Options.LiveInvariants) found core's invariants broken; anything but 0
// is a bug.
func (r *Runtime) InvariantViolations() int64 { return r.live.violations.Load() }
