package events

// State is what tests read of the hub (Watch).
type State struct {
	Clients int    // streams subscribed
	Active  bool   // following every step (a client watches, or the hub lingers)
	Next    uint64 // the ID the next event gets
	Dropped int64  // clients dropped for falling behind
	Ring    int    // events in the ring
}

// Watch returns the hub's state and a channel closed at its next change
// (an event published, a client subscribed, unsubscribed or dropped, the
// hub switched on or off): tests wait on it instead of sleeping.
func (h *Hub) Watch() (State, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	if newest, oldest := h.newestLocked(), h.oldestLocked(); newest >= oldest {
		n = int(newest - oldest + 1)
	}
	return State{Clients: len(h.clients), Active: h.active, Next: h.next, Dropped: h.dropped.Load(), Ring: n}, h.changed
}

// Since returns the events in the ring whose ID is from or later, oldest
// first.
func (h *Hub) Since(from uint64) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for id := max(from, h.oldestLocked()); id <= h.newestLocked(); id++ {
		out = append(out, h.ring[id%uint64(len(h.ring))])
	}
	return out
}
