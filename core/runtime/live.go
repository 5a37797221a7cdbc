package runtime

import (
	"encoding/json"
	"strings"
	"sync/atomic"

	"github.com/sluice-dev/sluice/core"
)

// liveWindow is how many events before a violation its log shows.
const liveWindow = 32

// liveCheck checks core's invariants in production (Options.LiveInvariants)
// at a bounded cost: a full check (core.CheckInvariants walks every model
// and live ticket, and allocates nothing when they hold) after each backend
// completion (a load, clone, probe or teardown, each of which cost an
// engine call far dearer than the walk) and BeginShutdown, and after every
// every-th other event (submissions of requests and managers, cancels,
// releases, ticks), which clients can send at any rate. So whatever the
// traffic, a walk costs at most 1/every of the client events plus one per
// backend step. The last liveWindow
// events are kept by value in a ring (a copy of an Event, no allocation),
// and a violation logs them as trace records, with the machine's state.
//
// Threading rule: everything but violations is guarded by Runtime.mu.
type liveCheck struct {
	every  int // 0: off
	hot    int // client events since the last check
	ring   [liveWindow]liveEvent
	next   uint64 // events seen; ring[next%liveWindow] is the oldest
	checks uint64 // walks done
	logged bool   // a violation was logged (each later one is only counted)

	violations atomic.Int64
}

type liveEvent struct {
	ev core.Event
	tk core.Ticket
}

// liveLocked notes ev and checks the invariants when its turn has come.
func (r *Runtime) liveLocked(ev *core.Event, tk core.Ticket) {
	l := &r.live
	l.ring[l.next%liveWindow] = liveEvent{ev: *ev, tk: tk}
	l.next++
	switch ev.Kind {
	case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone, core.EvBeginShutdown:
	default:
		if l.hot++; l.hot < l.every {
			return
		}
	}
	l.hot = 0
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
		"after", ev.Kind.String(), "err", err, "state", r.m.Describe(), "events", l.windowLocked())
}

// windowLocked renders the ring, oldest first, as ndjson trace records
// (core.Record, the --trace format; the effects are not kept).
func (l *liveCheck) windowLocked() string {
	var b strings.Builder
	start := uint64(0)
	if l.next > liveWindow {
		start = l.next - liveWindow
	}
	for i := start; i < l.next; i++ {
		x := &l.ring[i%liveWindow]
		line, err := json.Marshal(core.EventRecord(x.ev, x.tk))
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
