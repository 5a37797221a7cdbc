package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/core/runtime"
)

// The event stream of GET /v1/events: one runtime observer (the hub's
// goroutine) turns scheduler steps into Events, numbers them, keeps
// the last eventRing of them for resumption with Last-Event-ID, and fans
// each one out to every connected client without ever waiting: a client
// whose bounded buffer is full is dropped (its channel closed, its stream
// ends) and can resume from the ring.

// Defaults of the hub; tests lower them through limits.
const (
	eventRing      = 4096                 // events kept for Last-Event-ID
	eventClientBuf = 512                  // events a client may lag before it is dropped
	eventRecBuffer = 1 << 15              // scheduler steps the hub may lag before the runtime drops it
	eventBatchMax  = 4096                 // steps translated per lock hold
	eventPause     = 5 * time.Millisecond // lets records gather between batches, as the metrics feed does
	eventLinger    = 2 * time.Minute      // the hub stays subscribed this long after its last client left
)

// Event is one entry of GET /v1/events: what happened (Type), to which
// model, when, and the model's status right after the scheduler step that
// caused it (Status: the model object of GET /v1/models/{id}).
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

	Status *Model `json:"status,omitempty"`

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

// eventClient is one GET /v1/events stream.
type eventClient struct {
	ch     chan Event
	closed bool // under hub.mu
}

// hubLimits are the hub's bounds (tests lower them).
type hubLimits struct {
	ring         int
	clientBuf    int
	writeTimeout time.Duration // a stream write blocked this long fails
	linger       time.Duration // how long the hub follows the scheduler without a client
}

// eventHub owns the event ring, the clients and the translator. Its
// goroutine is the only writer; handlers take the lock only to subscribe
// and unsubscribe.
//
// The hub follows the scheduler only while someone watches: the first
// client subscribes it to the runtime (runtime.Observe with Status, so the
// translator starts from a snapshot of every model instead of a replay
// from startup), and it unsubscribes when it has had no client for its linger
// time (eventLinger), long enough for a dashboard to reload and resume. In
// between, requests pay nothing for it: with no full subscriber the
// runtime builds no records and keeps its admission fast path. Events of
// the unwatched time do not exist, so a resume point from before it gets
// a reset.
type eventHub struct {
	rt    *runtime.Runtime
	log   *slog.Logger
	epoch time.Time // wall-clock time of the scheduler clock's zero

	stop     chan struct{}
	done     chan struct{}
	activate chan activation // subscribe -> the goroutine: follow the scheduler
	idle     chan struct{}   // the last client left (buffered 1)

	dropped atomic.Int64 // clients dropped for falling behind (tests)

	mu      sync.Mutex
	lim     hubLimits
	ring    []Event // ring[id % len]
	base    uint64  // IDs start after base
	next    uint64  // the ID of the next event
	clients map[*eventClient]struct{}
	tr      *translator
	active  bool // subscribed to the runtime
	closed  bool
	changed chan struct{} // closed and replaced after every batch
}

// activation is a runtime subscription handed to the hub's goroutine.
type activation struct {
	ch     <-chan runtime.Step
	cancel func()
}

// observe subscribes to the runtime's steps, with statuses, starting from a
// snapshot of every model.
func (h *eventHub) observe() (<-chan runtime.Step, func()) {
	return h.rt.Observe(runtime.ObserveOptions{Buffer: eventRecBuffer, Status: true})
}

// newEventHub starts the hub's goroutine; the first client subscribes it
// to rt. epoch is the wall-clock time of the scheduler's clock zero (taken
// just before runtime.New). IDs start above epoch in microseconds, so IDs
// of a restarted server are larger than those of the process it replaced,
// and an old Last-Event-ID is answered with a reset instead of a wrong
// resumption.
//
// created gives a status object its created (model.go createdAt.of), so
// the stream's objects equal GET /v1/models'; nil leaves it out.
func newEventHub(rt *runtime.Runtime, epoch time.Time, log *slog.Logger, created func(id string) int64) *eventHub {
	base := uint64(epoch.UnixMicro())
	h := &eventHub{rt: rt, log: log, epoch: epoch, stop: make(chan struct{}), done: make(chan struct{}),
		activate: make(chan activation, 1), idle: make(chan struct{}, 1),
		lim:  hubLimits{ring: eventRing, clientBuf: eventClientBuf, writeTimeout: 10 * time.Second, linger: eventLinger},
		base: base, next: base + 1, clients: map[*eventClient]struct{}{}, changed: make(chan struct{})}
	h.ring = make([]Event, h.lim.ring)
	h.tr = newTranslator()
	h.tr.created = created
	go h.run()
	return h
}

// activateLocked subscribes the hub to the runtime, its translator starting
// from the statuses at that instant. The ring is emptied: the events of the
// unwatched time are missing, so no resume may cross it.
func (h *eventHub) activateLocked() {
	ch, cancel := h.observe()
	h.tr.restart()
	h.next++ // an ID no event has: a client that saw the newest one before must reset too
	h.base = h.next - 1
	h.active = true
	h.activate <- activation{ch: ch, cancel: cancel} // the goroutine is idle: it takes it
}

// limits replaces the hub's bounds (tests); a new ring size empties the
// ring, a zero linger keeps the current one. New bounds apply to clients
// that subscribe later.
func (h *eventHub) limits(l hubLimits) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.linger == 0 {
		l.linger = h.lim.linger
	}
	if l.ring != len(h.ring) {
		h.ring = make([]Event, l.ring)
		h.base = h.next - 1
	}
	h.lim = l
}

// close stops the hub and ends every stream.
func (h *eventHub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		<-h.done
		return
	}
	h.closed = true
	for c := range h.clients {
		h.dropLocked(c)
	}
	h.mu.Unlock()
	close(h.stop)
	<-h.done
}

// run is the hub's goroutine: idle until a client activates it, then
// following the scheduler until it lingered without clients or stops.
func (h *eventHub) run() {
	defer close(h.done)
	for {
		select {
		case a := <-h.activate:
			if !h.follow(a) {
				return
			}
		case <-h.stop:
			return
		}
	}
}

// follow translates the steps of one subscription in batches. It returns
// true when the hub went idle (no client for the linger time) and false
// when the hub stopped.
func (h *eventHub) follow(a activation) bool {
	ch, cancel := a.ch, a.cancel
	pause := time.NewTimer(eventPause)
	pause.Stop()
	defer pause.Stop()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	batch := make([]runtime.Step, 0, 256)
	for {
		var rec runtime.Step
		var ok bool
		select {
		case rec, ok = <-ch:
		case <-h.idle:
			linger.Reset(h.lingerTime())
			continue
		case <-linger.C:
			if h.deactivate(cancel) {
				for range ch { // cancel closed it; drop what was still sent
				}
				return true
			}
			continue
		case <-h.stop:
			cancel()
			return false
		}
		if ok {
			batch = append(batch[:0], rec)
			ok = drainInto(ch, &batch)
		}
		h.apply(batch, !ok)
		batch = batch[:0]
		if !ok { // the runtime dropped the hub: resubscribe from a fresh snapshot
			cancel()
			h.log.Warn("event stream fell behind the scheduler; resubscribing (clients are told to reload)")
			h.mu.Lock()
			ch, cancel = h.observe()
			h.tr.restart()
			h.mu.Unlock()
			continue
		}
		pause.Reset(eventPause)
		select {
		case <-pause.C:
		case <-h.stop:
			cancel()
			return false
		}
	}
}

// deactivate ends the subscription if the hub still has no client.
func (h *eventHub) deactivate(cancel func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) > 0 || h.closed {
		return false
	}
	cancel()
	h.active = false
	h.tr.restart()
	h.signalLocked()
	return true
}

func (h *eventHub) lingerTime() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lim.linger
}

// drainInto appends the steps already sent, up to eventBatchMax; it
// reports false when ch was closed.
func drainInto(ch <-chan runtime.Step, batch *[]runtime.Step) bool {
	for len(*batch) < eventBatchMax {
		select {
		case rec, ok := <-ch:
			if !ok {
				return false
			}
			*batch = append(*batch, rec)
		default:
			return true
		}
	}
	return true
}

// apply translates a batch and publishes its events under one lock hold.
// lost says the subscription was dropped after the batch: clients get a
// reset telling them to reload.
func (h *eventHub) apply(batch []runtime.Step, lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range batch {
		h.tr.apply(&batch[i])
	}
	if lost {
		var t int64
		if n := len(batch); n > 0 {
			t = batch[n-1].Event.Now
		}
		h.tr.out = append(h.tr.out, Event{Type: "reset", Reason: "the event stream fell behind the scheduler", T: t})
	}
	for _, ev := range h.tr.out {
		h.publishLocked(ev)
	}
	h.tr.out = h.tr.out[:0]
	h.signalLocked()
}

// signalLocked wakes waiters (tests): events were published or the set of
// clients changed.
func (h *eventHub) signalLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// publishLocked numbers ev, stores it in the ring and offers it to every
// client without blocking.
func (h *eventHub) publishLocked(ev Event) {
	ev.ID = h.next
	h.next++
	h.ring[ev.ID%uint64(len(h.ring))] = ev
	for c := range h.clients {
		select {
		case c.ch <- ev:
		default: // never wait for a client: drop it; it may resume from the ring
			h.dropLocked(c)
			h.dropped.Add(1)
			h.log.Debug("events: dropping a client that fell behind")
		}
	}
}

func (h *eventHub) dropLocked(c *eventClient) {
	delete(h.clients, c)
	if !c.closed {
		c.closed = true
		close(c.ch)
	}
	if len(h.clients) == 0 {
		select {
		case h.idle <- struct{}{}: // the goroutine starts its linger time
		default:
		}
	}
	h.signalLocked()
}

// oldestLocked and newestLocked bound the IDs in the ring (newest < oldest
// when it is empty).
func (h *eventHub) oldestLocked() uint64 {
	if n := uint64(len(h.ring)); h.next-h.base > n {
		return h.next - n
	}
	return h.base + 1
}

func (h *eventHub) newestLocked() uint64 { return h.next - 1 }

// errHubClosed is returned by subscribe once the hub has stopped.
var errHubClosed = errors.New("event stream closed")

// subscription is what a new stream starts from.
type subscription struct {
	c      *eventClient
	replay []Event
	reset  bool   // the resume point is not in the ring: reload state
	newest uint64 // the ID a reset stands at
}

// subscribe registers a client. With resume, the events after last are
// replayed when last is in the ring (or is the newest ID); otherwise reset
// is set. Without resume, the last backlog events are replayed. Replay and
// registration happen under one lock hold: no event is missed or doubled.
func (h *eventHub) subscribe(resume bool, last uint64, backlog int) (subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return subscription{}, errHubClosed
	}
	if !h.active {
		h.activateLocked()
	}
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
	sub.c = &eventClient{ch: make(chan Event, h.lim.clientBuf)}
	h.clients[sub.c] = struct{}{}
	h.signalLocked()
	return sub, nil
}

// unsubscribe ends a client's subscription.
func (h *eventHub) unsubscribe(c *eventClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(c)
}

// writeTimeout returns the bound on one blocked stream write.
func (h *eventHub) writeTimeout() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lim.writeTimeout
}

// frame appends the SSE frame of ev (id, event and data lines) to b. The
// wall-clock time is formatted here, only for events that are sent.
func (h *eventHub) frame(b []byte, ev *Event) ([]byte, error) {
	if ev.Time == "" {
		ev.Time = h.epoch.Add(time.Duration(ev.T)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return b, err
	}
	b = append(b, "id: "...)
	b = appendUint(b, ev.ID)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, '\n', '\n'), nil
}

func appendUint(b []byte, v uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}
