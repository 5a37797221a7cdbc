// Package events is the event stream of GET /v1/events (CONTRACT.md
// ui.*): the hub that turns the scheduler's steps into Events, numbers
// them, keeps the last Ring of them for resumption with Last-Event-ID and
// fans each one out to every connected client without ever waiting (a
// client whose bounded buffer is full is dropped: its channel closed, its
// stream ends, and it can resume from the ring), and the handler that
// writes a client's stream (server/internal/sse).
//
// The hub is a consumer of the server's one runtime follower
// (server/internal/follow), which it shares with the metrics: it asks the
// follower for every step with statuses only while a client watches.
// It imports nothing of package server: the server hands it the status
// object of a model (Options.Status) and checks the shutdown flag.
package events

import (
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/sse"
)

// Defaults of the hub; tests lower them through Limits.
const (
	Ring      = 4096            // events kept for Last-Event-ID
	ClientBuf = 512             // events a client may lag before it is dropped
	Linger    = 2 * time.Minute // the hub follows every step this long after its last client left
)

// Event is one entry of GET /v1/events: what happened (Type), to which
// model, when, and the model's status right after the scheduler step that
// caused it (Status: the model object of GET /v1/models/{id}, made by
// Options.Status).
//
// Types: registered, unregistered (the model was deleted; a later PUT
// registers it again), queued, admission, rejection, release, manager, done,
// bulk_unload, load, probe, loaded, load_failed, probe_failed, unload,
// eviction, unloaded, state (a lifecycle transition From -> To), status (a
// counter change with no other event), shutdown, shutdown_complete, and
// reset (events were lost: reload the state from GET /v1/models).
type Event struct {
	ID    uint64 `json:"id"`
	Type  string `json:"type"`
	Time  string `json:"time"` // RFC 3339, the server's wall clock
	T     int64  `json:"t_ns"` // nanoseconds on the scheduler's clock
	Model string `json:"model,omitempty"`

	Status any `json:"status,omitempty"`

	From     string   `json:"from,omitempty"`   // state: old state
	To       string   `json:"to,omitempty"`     // state: new state
	Kind     string   `json:"kind,omitempty"`   // request, manager or bulk
	Op       string   `json:"op,omitempty"`     // manager: apply, load, unload
	Ticket   uint64   `json:"ticket,omitempty"` // the scheduler's ticket of a request or manager
	Slot     *int     `json:"slot,omitempty"`   // admission: the slot granted
	Version  uint64   `json:"version,omitempty"`
	Slots    int      `json:"slots,omitempty"`    // load: the pool's slot count
	WaitMS   *float64 `json:"wait_ms,omitempty"`  // admission, rejection: time since submission
	TookMS   *float64 `json:"took_ms,omitempty"`  // loaded, unloaded: duration of the load or teardown
	Code     string   `json:"code,omitempty"`     // rejection: the scheduler's code (server_busy, ...)
	Reason   string   `json:"reason,omitempty"`   // rejection: core.RejectReason (refused_on_arrival, timeout, disconnect, shutdown, load_failed, no_room); reset: why
	Cause    string   `json:"cause,omitempty"`    // unload, eviction, unloaded: unload, evict, idle, ...
	Failed   bool     `json:"failed,omitempty"`   // release: the inference failed
	Capacity int      `json:"capacity,omitempty"` // loaded: advertised parallel capacity
	Models   []string `json:"models,omitempty"`   // bulk_unload
}

// client is one GET /v1/events stream.
type client struct {
	ch     chan Event
	closed bool // under Hub.mu
}

// Limits are the hub's bounds (tests lower them).
type Limits struct {
	Ring         int           // events kept for Last-Event-ID
	ClientBuf    int           // events a client may lag before it is dropped
	WriteTimeout time.Duration // a stream write blocked this long fails
	Linger       time.Duration // how long the hub follows every step without a client
}

// Follower is what the hub asks for every step (*follow.Follower): Full
// switches the one runtime subscription and returns the number of the
// subscription whose steps have the new options.
type Follower interface {
	Full(full bool) uint64
}

// Options are the hub's inputs from package server.
type Options struct {
	// Epoch is the wall-clock time of the scheduler clock's zero (taken
	// just before runtime.New). IDs start above it in microseconds, so IDs
	// of a restarted server are larger than those of the process it
	// replaced, and an old Last-Event-ID is answered with a reset instead
	// of a wrong resumption.
	Epoch time.Time
	Log   *slog.Logger
	// Status makes the status object of an event from the model's status
	// (the model object of GET /v1/models/{id}, its created included, so
	// the stream's objects equal the API's); nil leaves statuses out.
	Status func(core.ModelStatus) any
	// ShuttingDown reports whether the server's shutdown began: new
	// streams are then refused.
	ShuttingDown func() bool
}

// Hub owns the event ring, the clients and the translator. The follower's
// goroutine is its only writer (Begin, Steps); handlers take the lock only
// to subscribe and unsubscribe.
//
// The hub follows every step only while someone watches: the first client
// switches the follower to every step with statuses (follow.Follower.Full),
// so the translator starts from a snapshot of every model instead of a
// replay from startup, and the hub switches it back to the lifecycle when
// it has had no client for its linger time (Linger), long enough for a
// dashboard to reload and resume. In between, requests pay nothing for it:
// with no full subscriber the runtime builds no steps for them and keeps
// its admission fast path. Events of the unwatched time do not exist, so a
// resume point from before it gets a reset.
type Hub struct {
	opt Options
	fol Follower

	dropped atomic.Int64 // clients dropped for falling behind (tests)

	mu      sync.Mutex
	lim     Limits
	ring    []Event // ring[id % len]
	base    uint64  // IDs start after base
	next    uint64  // the ID of the next event
	clients map[*client]struct{}
	tr      *translator
	active  bool   // following every step (for a client, or lingering)
	want    uint64 // the follower's subscription that starts the active time
	follows bool   // the translator is on the steps of want (or a later full one)
	linger  *time.Timer
	lingerN uint64 // the linger timer's round: a stale firing does nothing
	lastT   int64  // the scheduler time of the last step translated
	closed  bool
	changed chan struct{} // closed and replaced after every batch and client change
}

// New returns a hub; Follow must give it its follower before the first
// subscription.
func New(o Options) *Hub {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	base := uint64(o.Epoch.UnixMicro())
	h := &Hub{opt: o, lim: Limits{Ring: Ring, ClientBuf: ClientBuf, WriteTimeout: 10 * time.Second, Linger: Linger},
		base: base, next: base + 1, clients: map[*client]struct{}{}, changed: make(chan struct{})}
	h.ring = make([]Event, h.lim.Ring)
	h.tr = newTranslator()
	h.tr.status = o.Status
	return h
}

// Follow gives the hub the follower it switches.
func (h *Hub) Follow(f Follower) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fol = f
}

// activateLocked asks the follower for every step with statuses; the
// translator starts at the snapshot that begins them. The ring is emptied:
// the events of the unwatched time are missing, so no resume may cross it.
func (h *Hub) activateLocked() {
	h.want = h.fol.Full(true)
	h.follows = false
	h.tr.restart()
	h.next++ // an ID no event has: a client that saw the newest one before must reset too
	h.base = h.next - 1
	h.active = true
}

// SetLimits replaces the hub's bounds (tests); a new ring size empties the
// ring, a zero linger keeps the current one. New bounds apply to clients
// that subscribe later.
func (h *Hub) SetLimits(l Limits) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.Linger == 0 {
		l.Linger = h.lim.Linger
	}
	if l.Ring != len(h.ring) {
		h.ring = make([]Event, l.Ring)
		h.base = h.next - 1
	}
	h.lim = l
}

// Close ends every stream; new ones are refused.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for c := range h.clients {
		h.dropLocked(c)
	}
	if h.linger != nil {
		h.linger.Stop()
	}
}

// Begin is the follower's: the steps after it come from its subscription
// gen. The translator takes them from the snapshot of the subscription the
// hub asked for, or of a later full one (after the runtime dropped the
// follower); lost steps give clients a reset telling them to reload.
func (h *Hub) Begin(gen uint64, full, lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if lost && h.active {
		h.publishLocked(Event{Type: "reset", Reason: "the event stream fell behind the scheduler", T: h.lastT})
		h.signalLocked()
	}
	h.follows = h.active && full && gen >= h.want
	h.tr.restart()
}

// Steps is the follower's: it translates a batch and publishes its events
// under one lock hold.
func (h *Hub) Steps(batch []runtime.Step) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.follows || len(batch) == 0 {
		return
	}
	for i := range batch {
		h.tr.apply(&batch[i])
	}
	h.lastT = batch[len(batch)-1].Event.Now
	for _, ev := range h.tr.out {
		h.publishLocked(ev)
	}
	clear(h.tr.out)
	h.tr.out = h.tr.out[:0]
	h.signalLocked()
}

// lingerLocked starts the linger time after the last client left.
func (h *Hub) lingerLocked() {
	h.lingerN++
	n, d := h.lingerN, h.lim.Linger
	if h.linger != nil {
		h.linger.Stop()
	}
	h.linger = time.AfterFunc(d, func() { h.deactivate(n) })
}

// deactivate switches the follower back to the lifecycle if the hub still
// has no client since the linger time of round n began.
func (h *Hub) deactivate(n uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n != h.lingerN || len(h.clients) > 0 || !h.active || h.closed {
		return
	}
	h.fol.Full(false)
	h.active, h.follows = false, false
	h.tr.restart()
	h.signalLocked()
}

// signalLocked wakes waiters (tests): events were published or the set of
// clients changed.
func (h *Hub) signalLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// publishLocked numbers ev, stores it in the ring and offers it to every
// client without blocking.
func (h *Hub) publishLocked(ev Event) {
	ev.ID = h.next
	h.next++
	h.ring[ev.ID%uint64(len(h.ring))] = ev
	for c := range h.clients {
		select {
		case c.ch <- ev:
		default: // never wait for a client: drop it; it may resume from the ring
			h.dropLocked(c)
			h.dropped.Add(1)
			h.opt.Log.Debug("events: dropping a client that fell behind")
		}
	}
}

func (h *Hub) dropLocked(c *client) {
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		if len(h.clients) == 0 && !h.closed {
			h.lingerLocked()
		}
	}
	if !c.closed {
		c.closed = true
		close(c.ch)
	}
	h.signalLocked()
}

// oldestLocked and newestLocked bound the IDs in the ring (newest < oldest
// when it is empty).
func (h *Hub) oldestLocked() uint64 {
	if n := uint64(len(h.ring)); h.next-h.base > n {
		return h.next - n
	}
	return h.base + 1
}

func (h *Hub) newestLocked() uint64 { return h.next - 1 }

// errHubClosed is returned by subscribe once the hub has stopped.
var errHubClosed = errors.New("event stream closed")

// subscription is what a new stream starts from.
type subscription struct {
	c      *client
	replay []Event
	reset  bool   // the resume point is not in the ring: reload state
	newest uint64 // the ID a reset stands at
}

// subscribe registers a client. With resume, the events after last are
// replayed when last is in the ring (or is the newest ID); otherwise reset
// is set. Without resume, the last backlog events are replayed. Replay and
// registration happen under one lock hold: no event is missed or doubled.
func (h *Hub) subscribe(resume bool, last uint64, backlog int) (subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return subscription{}, errHubClosed
	}
	if !h.active {
		h.activateLocked()
	}
	h.lingerN++ // a linger time under way ends: someone watches
	oldest, newest := h.oldestLocked(), h.newestLocked()
	sub := subscription{newest: newest}
	from := newest + 1 // the first ID to replay
	switch {
	case resume && last+1 >= oldest && last <= newest:
		from = last + 1
	case resume:
		sub.reset = true
	case backlog > 0:
		from = max(oldest, newest+1-uint64(backlog))
	}
	for id := from; id <= newest && id >= oldest; id++ {
		sub.replay = append(sub.replay, h.ring[id%uint64(len(h.ring))])
	}
	sub.c = &client{ch: make(chan Event, h.lim.ClientBuf)}
	h.clients[sub.c] = struct{}{}
	h.signalLocked()
	return sub, nil
}

// unsubscribe ends a client's subscription.
func (h *Hub) unsubscribe(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(c)
}

// writeTimeout returns the bound on one blocked stream write.
func (h *Hub) writeTimeout() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lim.WriteTimeout
}

// frame appends the SSE frame of ev (id, event and data lines) to b. The
// wall-clock time is formatted here, only for events that are sent.
func (h *Hub) frame(b []byte, ev *Event) ([]byte, error) {
	if ev.Time == "" {
		ev.Time = h.opt.Epoch.Add(time.Duration(ev.T)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return b, err
	}
	return sse.AppendEventID(b, ev.ID, ev.Type, data), nil
}
