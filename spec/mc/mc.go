// Package mc is Sluice's explicit-state model checker: a breadth-first search
// over a System (the spec transcription or the real core, see spec/check)
// with 64-bit fingerprints of canonical state keys, a check on every
// transition, deadlock and fair-termination detection, an optional cycle
// search for liveness, and the shortest counterexample as a list of labels.
//
// Threading rule: Run expands each BFS level on Options.Workers goroutines,
// calling System.Expand (or a Deriver's Root, Derive and ExpandState)
// concurrently; merging (deduplication, numbering, edges) is sequential and
// in a fixed order, so results and counterexamples do not depend on
// scheduling.
package mc

import (
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/spec/env"
)

// Violation is a property the checker found broken.
type Violation struct {
	Kind   string // "invariant", "spec-invariant", "refinement", "ticket", "deadlock", "liveness", "error"
	Name   string // the invariant's or property's name
	Detail string
}

// Error formats the violation.
func (v *Violation) Error() string { return v.Kind + " " + v.Name + ": " + v.Detail }

// Succ is one transition out of an expanded state.
type Succ struct {
	Label   env.Label
	FP      uint64 // Fingerprint of the target's canonical key (unused for a stutter)
	State   any    // the target, for systems that keep states in memory
	Stutter bool   // the target equals the source
	Err     *Violation
}

// Expansion is what System.Expand reports about one state.
type Expansion struct {
	Succs []Succ
	// Fair: some weakly fair event (a release, a backend completion) is
	// enabled. A state where none is has no fair continuation but to stop.
	Fair bool
	// Waiting: some ticket waits to be served (queued, waiting for its pool,
	// a granted manager, a bulk parent).
	Waiting bool
	// ShutdownPending: shutdown began and ShutdownComplete did not follow yet.
	ShutdownPending bool
	// Checks counts invariant evaluations, Refinements refinement checks.
	Checks, Refinements int64
	// Err is a violation found on the state itself.
	Err *Violation
}

// Root is one initial state.
type Root struct {
	FP    uint64
	State any
}

// System is what the checker explores.
type System interface {
	// Roots returns the initial states.
	Roots() ([]Root, error)
	// Expand returns the transitions of the state reached from root by path
	// (st is the state kept in memory, or nil: then the system rebuilds it
	// from the path).
	Expand(root int, path []env.Label, st any) (Expansion, error)
}

// Deriver is implemented by systems that do not keep states in memory but
// can copy one. Run then rebuilds a state from a copy of its parent's,
// walking the BFS tree so that the ancestors of one state stay materialized
// for the next (siblings are numbered consecutively), instead of replaying
// the whole path from an initial state.
type Deriver interface {
	// Root returns initial state k (the index of Roots) materialized.
	Root(k int) (any, error)
	// Derive returns the state that l leads to from parent, leaving parent
	// unchanged. l is a label that Expand reported for parent.
	Derive(parent any, l env.Label) (any, error)
	// ExpandState is System.Expand of a materialized state; it may change st.
	ExpandState(st any) (Expansion, error)
}

// Recycler is implemented by Derivers whose states may be reused: the
// checker hands back every state it no longer holds (one it expanded, an
// ancestor it dropped from a walker's stack), so Derive can build the next
// one in its memory.
type Recycler interface {
	Recycle(st any)
}

// Options tune a run.
type Options struct {
	Workers   int       // goroutines expanding states (0: GOMAXPROCS)
	MaxStates int       // stop (verdict "incomplete") beyond this many states (0: no limit)
	Liveness  bool      // keep every edge and search for cycles that starve a waiting ticket
	Deadline  time.Time // stop (verdict "incomplete") after this time (zero: none)
	Progress  io.Writer // a line per BFS level when set

	_ struct{}
}

// Result is the outcome of a run.
type Result struct {
	States, Transitions int64
	Depth               int
	Elapsed             time.Duration
	Checks, Refinements int64
	Terminal            int64 // states with no fair continuation (all were checked)
	// CompleteDepth: every state within this many steps of an initial state
	// was expanded and every transition out of it checked (the whole depth
	// when Complete).
	CompleteDepth int
	Cycles        int  // nontrivial strongly connected components found (Liveness)
	Complete      bool // the whole bounded space was explored
	Violation     *Violation
	Root          int         // of the counterexample
	Path          []env.Label // the counterexample, shortest first found
	// Cycle, for a liveness violation, is the part of Path that repeats.
	Cycle []env.Label

	table *fpTable
}

// Has reports whether a state with fingerprint fp was reached.
func (r *Result) Has(fp uint64) bool {
	if r.table == nil {
		return false
	}
	_, found := r.table.lookup(fp)
	return found
}

// CollisionProbability estimates the chance that two distinct states shared
// a 64-bit fingerprint (n^2 / 2^65).
func (r *Result) CollisionProbability() float64 {
	n := float64(r.States)
	return n * n / (1 << 65)
}

// Verdict is "ok", "violation" or "incomplete".
func (r *Result) Verdict() string {
	switch {
	case r.Violation != nil:
		return "violation"
	case !r.Complete:
		return "incomplete"
	}
	return "ok"
}

var seed = maphash.MakeSeed()

// Fingerprint is the 64-bit fingerprint of a canonical key (never 0).
func Fingerprint(key []byte) uint64 {
	h := maphash.Bytes(seed, key)
	if h == 0 {
		h = 1
	}
	return h
}

type checker struct {
	sys     System
	der     Deriver // sys, when it derives states from their parent's
	walkers []walker
	opts    Options
	table   fpTable
	parent  []int32
	label   []env.Packed // the label from the parent; a root's holds its index
	// Liveness graph in CSR form: the successors of state id are
	// edges[off[id]:off[id+1]].
	off     []int64
	edges   []int32
	waiting []bool
	fps     []uint64 // fingerprints by state (Liveness: to name cycle edges)
}

func (c *checker) path(id int32) (int, []env.Label) {
	var rev []env.Label
	for c.parent[id] >= 0 {
		rev = append(rev, c.label[id].Label())
		id = c.parent[id]
	}
	out := make([]env.Label, len(rev))
	for k := range rev {
		out[k] = rev[len(rev)-1-k]
	}
	return int(c.label[id].Label().Model), out // a root's label holds its index
}

// job is a state being expanded: its number, the state for systems that
// keep states in memory, and what expanding it found.
type job struct {
	id  int32
	st  any
	exp Expansion
	err error
}

// Run explores sys breadth-first.
//
// States are numbered in the order they are found, so each BFS level is a
// contiguous range of numbers and the frontier needs no list of its own.
// Per state the checker keeps its fingerprint, its parent's number and the
// label from the parent: a state is rebuilt from that path (System.Expand),
// or, for a Deriver, from a copy of its parent's state.
func Run(sys System, opts Options) (*Result, error) {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	c := &checker{sys: sys, opts: opts}
	c.der, _ = sys.(Deriver)
	c.walkers = make([]walker, opts.Workers)
	c.table.init(1 << 16)
	res := &Result{table: &c.table, CompleteDepth: -1}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	roots, err := sys.Roots()
	if err != nil {
		return nil, err
	}
	var states []any // the level's states, for systems that keep them
	for k, r := range roots {
		_, fresh := c.table.insert(r.FP, int32(len(c.parent)))
		if !fresh {
			continue
		}
		c.parent = append(c.parent, -1)
		c.label = append(c.label, env.Label{Model: uint8(k)}.Pack())
		if opts.Liveness {
			c.waiting = append(c.waiting, false)
			c.fps = append(c.fps, r.FP)
		}
		if c.der == nil {
			states = append(states, r.State)
		}
	}
	res.States = int64(len(c.parent))
	part := make([]job, 0, batch)
	for depth, lo, hi := 0, 0, len(c.parent); lo < hi; depth, lo, hi = depth+1, hi, len(c.parent) {
		res.Depth = depth
		var next []any
		for b := lo; b < hi; b += batch {
			part = part[:0]
			for id := b; id < min(b+batch, hi); id++ {
				j := job{id: int32(id)}
				if states != nil {
					j.st, states[id-lo] = states[id-lo], nil // the job holds it now
				}
				part = append(part, j)
			}
			c.expand(part)
			var err error
			next, err = c.merge(part, next, res)
			if err != nil {
				return nil, err
			}
			if res.Violation != nil {
				break
			}
			if !opts.Deadline.IsZero() && time.Now().After(opts.Deadline) {
				res.States = int64(len(c.parent))
				return res, nil
			}
		}
		res.CompleteDepth = depth
		res.States = int64(len(c.parent))
		if c.opts.Progress != nil {
			fmt.Fprintf(c.opts.Progress, "  depth %d: %d states, %d transitions, frontier %d, %.0fs\n",
				depth, res.States, res.Transitions, len(c.parent)-hi, time.Since(start).Seconds())
		}
		if res.Violation != nil {
			return res, nil
		}
		if opts.MaxStates > 0 && res.States > int64(opts.MaxStates) {
			return res, nil
		}
		states = next
	}
	res.Complete = true
	if c.opts.Liveness {
		c.off = append(c.off, int64(len(c.edges)))
		c.cycles(res)
	}
	return res, nil
}

// batch is how many states are expanded before their successors are merged:
// it bounds the memory of successors not yet deduplicated.
const batch = 1 << 14

// merge deduplicates the successors of part in order, numbering new states
// and recording violations; for systems that keep states it appends the new
// ones to next.
func (c *checker) merge(part []job, next []any, res *Result) ([]any, error) {
	for k := range part {
		j := &part[k]
		if j.err != nil {
			return nil, j.err
		}
		e := &j.exp
		res.Checks += e.Checks
		res.Refinements += e.Refinements
		if c.opts.Liveness {
			c.off = append(c.off, int64(len(c.edges)))
		}
		if c.opts.Liveness {
			c.waiting[j.id] = e.Waiting
		}
		if e.Err != nil && res.Violation == nil {
			res.Violation = e.Err
			res.Root, res.Path = c.path(j.id)
		}
		if !e.Fair {
			res.Terminal++
			if res.Violation == nil && (e.Waiting || e.ShutdownPending) {
				what := "a ticket waits"
				if !e.Waiting {
					what = "shutdown never completes"
				}
				kind := "liveness"
				if len(e.Succs) == 0 {
					kind = "deadlock"
				}
				res.Violation = &Violation{Kind: kind, Name: "NoStarvation",
					Detail: what + " but no fair event (release, backend completion) is enabled"}
				res.Root, res.Path = c.path(j.id)
			}
		}
		for _, s := range e.Succs {
			res.Transitions++
			if s.Err != nil && res.Violation == nil {
				res.Violation = s.Err
				r, p := c.path(j.id)
				res.Root, res.Path = r, append(p, s.Label)
			}
			if s.Stutter || s.Err != nil {
				continue
			}
			id, fresh := c.table.insert(s.FP, int32(len(c.parent)))
			if fresh {
				c.parent = append(c.parent, j.id)
				c.label = append(c.label, s.Label.Pack())
				if c.opts.Liveness {
					c.waiting = append(c.waiting, false)
					c.fps = append(c.fps, s.FP)
				}
				if c.der == nil {
					next = append(next, s.State)
				}
			}
			if c.opts.Liveness {
				c.edges = append(c.edges, id)
			}
		}
		j.exp = Expansion{}
		j.st = nil
	}
	return next, nil
}

// expand expands every job of a batch, in parallel. Workers take
// contiguous chunks, so a Deriver's walker finds the ancestors of one state
// still materialized for the next.
func (c *checker) expand(part []job) {
	var wg sync.WaitGroup
	var next atomic.Int64
	n := int64(len(part))
	chunk := max(64, n/int64(4*c.opts.Workers))
	for w := 0; w < c.opts.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &c.walkers[w]
			for {
				lo := next.Add(chunk) - chunk
				if lo >= n {
					return
				}
				for k := lo; k < min(lo+chunk, n); k++ {
					j := &part[k]
					if c.der != nil {
						var st any
						if st, j.err = wk.state(c, j.id); j.err == nil {
							j.exp, j.err = c.der.ExpandState(st)
							if rc, ok := c.der.(Recycler); ok {
								rc.Recycle(st)
							}
						}
						continue
					}
					root, path := c.path(j.id)
					j.exp, j.err = c.sys.Expand(root, path, j.st)
				}
			}
		}()
	}
	wg.Wait()
}

// walker rebuilds states of a Deriver along the BFS tree; one per worker.
type walker struct {
	stack []frame // materialized ancestors of the last state, from its root
	chain []int32
}

type frame struct {
	id int32
	st any
}

// state returns state id materialized: its ancestors are derived from the
// deepest one still on the stack, then id itself from its parent. The
// returned state is the caller's; the stack's states are never handed out.
func (w *walker) state(c *checker, id int32) (any, error) {
	w.chain = w.chain[:0]
	for p := c.parent[id]; p >= 0; p = c.parent[p] {
		w.chain = append(w.chain, p)
	}
	slices.Reverse(w.chain)
	k := 0
	for k < len(w.stack) && k < len(w.chain) && w.stack[k].id == w.chain[k] {
		k++
	}
	if rc, ok := c.der.(Recycler); ok {
		for _, f := range w.stack[k:] {
			rc.Recycle(f.st)
		}
	}
	clear(w.stack[k:])
	w.stack = w.stack[:k]
	for ; k < len(w.chain); k++ {
		st, err := w.derive(c, w.chain[k])
		if err != nil {
			return nil, err
		}
		w.stack = append(w.stack, frame{id: w.chain[k], st: st})
	}
	return w.derive(c, id)
}

func (w *walker) derive(c *checker, id int32) (any, error) {
	if c.parent[id] < 0 {
		return c.der.Root(int(c.label[id].Label().Model))
	}
	return c.der.Derive(w.stack[len(w.stack)-1].st, c.label[id].Label())
}
