package mc

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/spec/env"
)

// toy is a counter system: from n, step to n+1 up to max; loop makes max
// step back to 0 (a cycle); stuckAt is a state with a waiting ticket and
// no fair event.
type toy struct {
	max, stuckAt int
	loop         bool
	waitAll      bool
}

func fp(n int) uint64 { return Fingerprint(binary.AppendUvarint(nil, uint64(n))) }

func (t *toy) Roots() ([]Root, error) { return []Root{{FP: fp(0), State: 0}}, nil }

func (t *toy) Expand(_ int, path []env.Label, st any) (Expansion, error) {
	if st == nil { // rebuilt from the path: the last label names the state
		st = 0
		if len(path) > 0 {
			st = int(path[len(path)-1].Ticket)
		}
	}
	n := st.(int)
	e := Expansion{Waiting: t.waitAll || n == t.stuckAt, Checks: 1}
	next := n + 1
	if n == t.max {
		if !t.loop {
			return e, nil
		}
		next = 0
	}
	if n == t.stuckAt {
		return e, nil
	}
	e.Fair = true
	e.Succs = append(e.Succs, Succ{Label: env.Label{Ticket: uint64(next)}, FP: fp(next), State: next})
	return e, nil
}

func TestBFSCountsAndDepth(t *testing.T) {
	res, err := Run(&toy{max: 9, stuckAt: -1}, Options{Liveness: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.States != 10 || res.Transitions != 9 || res.Verdict() != "ok" || res.Cycles != 0 {
		t.Fatalf("%+v", res)
	}
}

func TestDeadlockShortestPath(t *testing.T) {
	res, err := Run(&toy{max: 9, stuckAt: 4}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation == nil || res.Violation.Kind != "deadlock" || len(res.Path) != 4 {
		t.Fatalf("%+v %v", res, res.Violation)
	}
}

func TestStarvingCycle(t *testing.T) {
	res, err := Run(&toy{max: 3, stuckAt: -1, loop: true, waitAll: true}, Options{Liveness: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation == nil || res.Violation.Kind != "liveness" || res.Cycles != 1 || len(res.Cycle) != 4 {
		t.Fatalf("%+v %v", res, res.Violation)
	}
	res, err = Run(&toy{max: 3, stuckAt: -1, loop: true}, Options{Liveness: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Violation != nil || res.Cycles != 1 {
		t.Fatalf("a cycle without a waiting ticket is fine: %+v %v", res, res.Violation)
	}
}

func TestTable(t *testing.T) {
	var tb fpTable
	tb.init(4)
	for i := 1; i <= 1000; i++ {
		if _, fresh := tb.insert(uint64(i)*0x9e3779b97f4a7c15, int32(i)); !fresh {
			t.Fatal("dup")
		}
	}
	for i := 1; i <= 1000; i++ {
		if id, ok := tb.lookup(uint64(i) * 0x9e3779b97f4a7c15); !ok || id != int32(i) {
			t.Fatal("lost", i)
		}
	}
}

// tree is a binary counter system that rebuilds states from their parent's
// (a Deriver): state n steps to 2n+1 and 2n+2 below max, and n itself is
// checked against the path that reached it.
type tree struct {
	max     int
	derived *int
}

func (t *tree) Roots() ([]Root, error) { return []Root{{FP: fp(0)}}, nil }

func (t *tree) Expand(_ int, path []env.Label, _ any) (Expansion, error) {
	n := 0
	for _, l := range path {
		n = int(l.Ticket)
	}
	return t.ExpandState(n)
}

func (t *tree) Root(int) (any, error) { return 0, nil }

func (t *tree) Derive(parent any, l env.Label) (any, error) {
	*t.derived++
	p := parent.(int)
	if int(l.Ticket) != 2*p+1 && int(l.Ticket) != 2*p+2 {
		return nil, fmt.Errorf("label %d is not a child of %d", l.Ticket, p)
	}
	return int(l.Ticket), nil
}

func (t *tree) ExpandState(st any) (Expansion, error) {
	n := st.(int)
	e := Expansion{Fair: true}
	for _, c := range []int{2*n + 1, 2*n + 2} {
		if c <= t.max {
			e.Succs = append(e.Succs, Succ{Label: env.Label{Ticket: uint64(c)}, FP: fp(c)})
		}
	}
	return e, nil
}

// TestDeriverWalksTheTree: a Deriver's states are rebuilt from their
// parents along the BFS tree, each ancestor derived about once per level.
func TestDeriverWalksTheTree(t *testing.T) {
	var derived int
	res, err := Run(&tree{max: 1<<12 - 2, derived: &derived}, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.States != 1<<12-1 || res.Verdict() != "ok" || res.Depth != 11 {
		t.Fatalf("%+v", res)
	}
	// A replay from the root would derive sum(depth) ~ 10 per state.
	if derived > 3*int(res.States) {
		t.Fatalf("%d derivations for %d states", derived, res.States)
	}
}
