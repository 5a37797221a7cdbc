package sim

import "github.com/sluice-dev/sluice/core"

// evKind names a simulated happening waiting in the event heap.
type evKind uint8

const (
	evArrival       evKind = iota + 1 // a client of model a sends requests
	evManager                         // the next management operation
	evBulk                            // the next bulk unload
	evJob                             // a backend job of model a finishes (b: failed, c: capacity)
	evInferDone                       // an offline inference of ticket tk finishes
	evChunk                           // stream chunk b of ticket tk is written
	evDisconnect                      // the client of ticket tk goes away
	evClientTimeout                   // the client timer of ticket tk fires
	evTick                            // a core deadline is due
	evSpuriousTick                    // time passes with nothing due
	evShutdown                        // BeginShutdown
	evWatchdog                        // the liveness watchdog looks around
	evDupRelease                      // misuse probe: ticket tk is released again
	evDupJob                          // misuse probe: job completes again
	evLateCancel                      // misuse probe: cancel a ticket that ended
	evEarlyRelease                    // misuse probe: release a ticket that holds no lease
)

// item is one entry of the event heap. Entries with equal times pop in push
// order (seq), so a seed always replays the same interleaving.
type item struct {
	at   int64
	seq  uint64
	kind evKind
	a    int32
	b    int32
	c    int32
	f    bool
	tk   core.Ticket
	job  core.Job
}

// eventHeap is a binary min-heap of items ordered by (at, seq).
type eventHeap struct {
	xs  []item
	seq uint64
}

func (h *eventHeap) len() int { return len(h.xs) }

func before(a, b *item) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

func (h *eventHeap) push(it item) {
	h.seq++
	it.seq = h.seq
	h.xs = append(h.xs, it)
	i := len(h.xs) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !before(&h.xs[i], &h.xs[p]) {
			break
		}
		h.xs[i], h.xs[p] = h.xs[p], h.xs[i]
		i = p
	}
}

func (h *eventHeap) pop() item {
	top := h.xs[0]
	n := len(h.xs) - 1
	h.xs[0] = h.xs[n]
	h.xs = h.xs[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && before(&h.xs[r], &h.xs[l]) {
			c = r
		}
		if !before(&h.xs[c], &h.xs[i]) {
			break
		}
		h.xs[i], h.xs[c] = h.xs[c], h.xs[i]
		i = c
	}
	return top
}
