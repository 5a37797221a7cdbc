package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The event stream of GET /v1/events (issue 9): one runtime subscriber (the
// hub's goroutine) turns scheduler records into Events, numbers them, keeps
// the last eventRing of them for resumption with Last-Event-ID, and fans
// each one out to every connected client without ever waiting: a client
// whose bounded buffer is full is dropped (its channel closed, its stream
// ends) and can resume from the ring.

// Defaults of the hub; tests lower them through limits.
const (
	eventRing      = 4096                 // events kept for Last-Event-ID
	eventClientBuf = 512                  // events a client may lag before it is dropped
	eventRecBuffer = 1 << 15              // scheduler records the hub may lag before the runtime drops it
	eventBatchMax  = 4096                 // records translated per lock hold
	eventPause     = 5 * time.Millisecond // lets records gather between batches, as the metrics feed does
)

// Event is one entry of GET /v1/events: what happened (Type), to which
// model, when, and the model's status right after the scheduler step that
// caused it (Status: the model object of GET /v1/models/{id}).
//
// Types: registered, queued, admission, rejection, release, manager, done,
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
	Reason   string   `json:"reason,omitempty"`   // rejection: timeout, disconnect, shutdown, ...; reset: why
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
}

// eventHub owns the event ring, the clients and the translator. Its
// goroutine is the only writer; handlers take the lock only to subscribe,
// unsubscribe and read the mirror.
type eventHub struct {
	rt    *runtime.Runtime
	log   *slog.Logger
	epoch time.Time // wall-clock time of the scheduler clock's zero

	stop chan struct{}
	done chan struct{}

	dropped atomic.Int64 // clients dropped for falling behind (tests)

	mu      sync.Mutex
	lim     hubLimits
	ring    []Event // ring[id % len]
	base    uint64  // IDs start after base
	next    uint64  // the ID of the next event
	clients map[*eventClient]struct{}
	tr      *translator
	closed  bool
	changed chan struct{} // closed and replaced after every batch
}

// newEventHub subscribes to rt and starts the hub's goroutine. epoch is the
// wall-clock time of the scheduler's clock zero (taken just before
// runtime.New). IDs start above epoch in microseconds, so IDs of a restarted
// server are larger than those of the process it replaced, and an old
// Last-Event-ID is answered with a reset instead of a wrong resumption.
func newEventHub(rt *runtime.Runtime, opts core.Options, epoch time.Time, log *slog.Logger) *eventHub {
	base := uint64(epoch.UnixMicro())
	h := &eventHub{rt: rt, log: log, epoch: epoch, stop: make(chan struct{}), done: make(chan struct{}),
		lim:  hubLimits{ring: eventRing, clientBuf: eventClientBuf, writeTimeout: 10 * time.Second},
		base: base, next: base + 1, clients: map[*eventClient]struct{}{}, changed: make(chan struct{})}
	h.ring = make([]Event, h.lim.ring)
	h.tr = newTranslator(opts, log)
	ch, cancel := rt.Subscribe(eventRecBuffer) // before any event: the mirror sees every step
	go h.run(ch, cancel)
	return h
}

// limits replaces the hub's bounds (tests); a new ring size empties the
// ring. New bounds apply to clients that subscribe later.
func (h *eventHub) limits(l hubLimits) {
	h.mu.Lock()
	defer h.mu.Unlock()
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

func (h *eventHub) run(ch <-chan core.Record, cancel func()) {
	defer close(h.done)
	pause := time.NewTimer(eventPause)
	pause.Stop()
	defer pause.Stop()
	batch := make([]core.Record, 0, 256)
	for {
		var rec core.Record
		var ok bool
		select {
		case rec, ok = <-ch:
		case <-h.stop:
			cancel()
			return
		}
		if ok {
			batch = append(batch[:0], rec)
			ok = drainInto(ch, &batch)
		}
		h.apply(batch, !ok)
		batch = batch[:0]
		if !ok { // the runtime dropped the hub: resubscribe; the mirror is lost
			cancel()
			h.log.Warn("event stream fell behind the scheduler; resubscribing (clients are told to reload)")
			ch, cancel = h.rt.Subscribe(eventRecBuffer)
			continue
		}
		pause.Reset(eventPause)
		select {
		case <-pause.C:
		case <-h.stop:
			cancel()
			return
		}
	}
}

// drainInto appends the records already sent, up to eventBatchMax; it
// reports false when ch was closed.
func drainInto(ch <-chan core.Record, batch *[]core.Record) bool {
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
// lost says the subscription was dropped after the batch.
func (h *eventHub) apply(batch []core.Record, lost bool) {
	h.mu.Lock()
	mirrored := h.tr.m != nil
	h.mu.Unlock()
	var snap map[string]core.ModelStatus
	if !mirrored || lost { // without the mirror, statuses come from one snapshot per batch
		snap = snapshotMap(h.rt.Status()) // taken after the batch's records: at least as new
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tr.snap = snap
	for i := range batch {
		h.tr.record(&batch[i])
	}
	h.tr.endBatch()
	if lost {
		h.tr.lose("the event stream fell behind the scheduler")
	}
	for _, ev := range h.tr.out {
		h.publishLocked(ev)
	}
	h.tr.out = h.tr.out[:0]
	h.signalLocked()
}

// signalLocked wakes configOf waiters (and tests): the mirror or the set of
// clients changed.
func (h *eventHub) signalLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func snapshotMap(st []core.ModelStatus) map[string]core.ModelStatus {
	m := make(map[string]core.ModelStatus, len(st))
	for _, s := range st {
		m[s.ID] = s
	}
	return m
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

// errMirrorLost says the hub can no longer tell a model's committed config.
var errMirrorLost = errors.New("the server's event mirror fell behind the scheduler and cannot tell committed configs; restart the server to recover")

// configOf returns the committed config of model id once the mirror has
// caught up with version (the config_version the runtime reports now).
func (h *eventHub) configOf(ctx context.Context, id string, version uint64) (core.Config, error) {
	for {
		h.mu.Lock()
		m, changed := h.tr.m, h.changed
		if m == nil {
			h.mu.Unlock()
			return core.Config{}, errMirrorLost
		}
		if hd, ok := m.Lookup(id); ok && m.Status(hd).ConfigVersion >= version {
			cfg := *m.Config(hd)
			h.mu.Unlock()
			return cfg, nil
		}
		h.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return core.Config{}, context.Cause(ctx)
		case <-h.done:
			return core.Config{}, errHubClosed
		}
	}
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
