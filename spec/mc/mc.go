// Package mc is Sluice's explicit-state model checker: a breadth-first search
// over a System (the spec transcription or the real core, see spec/check)
// with 64-bit fingerprints of canonical state keys, a check on every
// transition, deadlock and fair-termination detection, an optional cycle
// search for liveness, and the shortest counterexample as a list of labels.
//
// Threading rule: Run expands each BFS level on Options.Workers goroutines,
// calling System.Expand concurrently; merging (deduplication, numbering,
// edges) is sequential and in a fixed order, so results and counterexamples
// do not depend on scheduling.
package mc

import (
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"sync"
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
	sys    System
	opts   Options
	table  fpTable
	parent []int32
	label  []env.Label
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
		rev = append(rev, c.label[id])
		id = c.parent[id]
	}
	out := make([]env.Label, len(rev))
	for k := range rev {
		out[k] = rev[len(rev)-1-k]
	}
	return int(c.label[id].Model), out // a root's label holds its index
}

// node is a state waiting for expansion: its number and, for systems that
// keep states in memory, the state.
type node struct {
	id int32
	st any
}

// job is a node being expanded.
type job struct {
	node
	exp Expansion
	err error
}

// Run explores sys breadth-first.
func Run(sys System, opts Options) (*Result, error) {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	c := &checker{sys: sys, opts: opts}
	c.table.init(1 << 16)
	res := &Result{table: &c.table, CompleteDepth: -1}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	roots, err := sys.Roots()
	if err != nil {
		return nil, err
	}
	var level []node
	for k, r := range roots {
		id, fresh := c.table.insert(r.FP, int32(len(c.parent)))
		if !fresh {
			continue
		}
		c.parent = append(c.parent, -1)
		c.label = append(c.label, env.Label{Model: uint8(k)})
		if opts.Liveness {
			c.waiting = append(c.waiting, false)
		}
		if opts.Liveness {
			c.fps = append(c.fps, r.FP)
		}
		level = append(level, node{id: id, st: r.State})
	}
	res.States = int64(len(level))
	for depth := 0; len(level) > 0; depth++ {
		res.Depth = depth
		var next []node
		part := make([]job, 0, batch)
		for lo := 0; lo < len(level); lo += batch {
			part = part[:0]
			for _, n := range level[lo:min(lo+batch, len(level))] {
				part = append(part, job{node: n})
			}
			for k := lo; k < min(lo+batch, len(level)); k++ {
				level[k].st = nil // the job holds it now
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
				return res, nil
			}
		}
		res.CompleteDepth = depth
		res.States = int64(len(c.parent))
		if c.opts.Progress != nil {
			fmt.Fprintf(c.opts.Progress, "  depth %d: %d states, %d transitions, frontier %d, %.0fs\n",
				depth, res.States, res.Transitions, len(next), time.Since(start).Seconds())
		}
		if res.Violation != nil {
			return res, nil
		}
		if opts.MaxStates > 0 && res.States > int64(opts.MaxStates) {
			return res, nil
		}
		level = next
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
const batch = 2048

// merge deduplicates the successors of part in order, numbering new states
// and recording violations.
func (c *checker) merge(part []job, next []node, res *Result) ([]node, error) {
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
				c.label = append(c.label, s.Label)
				if c.opts.Liveness {
					c.waiting = append(c.waiting, false)
					c.fps = append(c.fps, s.FP)
				}
				next = append(next, node{id: id, st: s.State})
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

// expand runs System.Expand on every job of a level, in parallel.
func (c *checker) expand(level []job) {
	var wg sync.WaitGroup
	var next int64
	var mu sync.Mutex
	const chunk = 64
	for w := 0; w < c.opts.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				lo := next
				next += chunk
				mu.Unlock()
				if lo >= int64(len(level)) {
					return
				}
				hi := min(lo+chunk, int64(len(level)))
				for k := lo; k < hi; k++ {
					j := &level[k]
					root, path := c.path(j.id)
					j.exp, j.err = c.sys.Expand(root, path, j.st)
				}
			}
		}()
	}
	wg.Wait()
}
