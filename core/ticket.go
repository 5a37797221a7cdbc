package core

// ticketKind says what a ticket stands for.
type ticketKind uint8

const (
	tkRequest ticketKind = iota + 1
	tkManager            // a targeted manager or a bulk member
	tkBulk               // a bulk parent: never queued itself
)

// phase is where a ticket stands.
type phase uint8

const (
	phQueued   phase = iota + 1 // in the model's FIFO
	phWaitInit                  // request admitted, owns a slot, waits for the pool
	phRunning                   // request granted, holds its lease until Release
	phManaging                  // manager granted, exclusive owner of its model
	phBulk                      // bulk parent waiting for its members
)

var phaseNames = [...]string{"", "queued", "wait_init", "running", "managing", "bulk"}

// ticket is one entry of the ticket table. Requests and managers are linked
// into their model's FIFO through prev/next while queued.
type ticket struct {
	gen     uint32
	kind    ticketKind
	phase   phase
	op      Op
	reason  Reason // bulk parent: why it was cancelled (0 when not)
	slot    int8
	model   Handle
	prev    int32
	next    int32
	parent  int32 // bulk member: index of the parent, else -1
	pending int32 // bulk parent: members not finished
	seq     uint64
	since   int64 // enqueue time, then admission time
	dead    int64 // admission deadline, 0 for none
	version uint64
	// committed: a manager that registered its model or committed a
	// config version (Effect.Committed).
	committed bool
	cfg       *Config
	bulk      *BulkResult
}

// tickets is a slab of tickets with a free list; allocation is amortised free.
type tickets struct {
	t    []ticket
	free []int32
	live int
}

func (ts *tickets) alloc() int32 {
	ts.live++
	if n := len(ts.free); n > 0 {
		i := ts.free[n-1]
		ts.free = ts.free[:n-1]
		return i
	}
	ts.t = append(ts.t, ticket{gen: 1})
	return int32(len(ts.t) - 1)
}

func (ts *tickets) release(i int32) {
	t := &ts.t[i]
	gen := t.gen + 1
	if gen == 0 {
		gen = 1
	}
	// Zeroed, then the generation stored: a literal {gen: gen} is built on
	// the stack and copied in wide moves that stall on its narrow store.
	*t = ticket{}
	t.gen = gen
	ts.free = append(ts.free, i)
	ts.live--
}

func (ts *tickets) id(i int32) Ticket { return Ticket(uint64(ts.t[i].gen)<<32 | uint64(uint32(i))) }

// lookup resolves a ticket to its index, or -1 when it is stale or unknown.
func (ts *tickets) lookup(id Ticket) int32 {
	i := int32(uint32(id))
	if i < 0 || int(i) >= len(ts.t) {
		return -1
	}
	t := &ts.t[i]
	if t.gen != uint32(id>>32) || t.kind == 0 {
		return -1
	}
	return i
}
