// Package gen generates conformance cases from the spec's state graph
// (issue 35): it walks spec/abstract from an empty registry through the
// actions a client of the HTTP API can cause on one model (inference held
// at a fixture gate, its release, a disconnect of a queued request, a
// register or reconfigure, load, unload, unregister and a bulk unload),
// each followed by every backend completion (the fixture's loads, clones,
// probes and teardowns finish on their own), and for each reachable state
// and each action enabled there writes one case: the steps of the
// shortest path that drives a server into that state, the action, the
// model fields the spec predicts after it (state, loaded, slots, active
// slots, queued requests and managers, config version), then the release
// of every held request and the answer the spec predicts for every call
// (status, error type, the config version that served it).
//
// A (state, action) pair is the spec's canonical state key
// (abstract.State.AppendKey, without ticket numbers) and the action's
// label. Pairs whose outcome the spec leaves open (more than one quiescent
// outcome) or that a case could not observe are counted, not generated.
//
// To extend the generated matrices, add an action to Actions (with its
// translation into steps in Case) or widen Bound; `make generate-cases`
// rewrites conformance/matrices/gen.yaml and TestGeneratedFresh fails
// while the file differs from what the generator writes.
package gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// Bound limits the walk: how many of each client action one path may take.
type Bound struct {
	Requests int // inference requests
	Managers int // put, load, unload and delete together (the first put included)
	Bulks    int // bulk unloads
	Releases int // releases and disconnects together
	Slots    []int
}

// DefaultBound is the bound `make generate-cases` uses.
var DefaultBound = Bound{Requests: 2, Managers: 2, Bulks: 1, Releases: 2, Slots: []int{1, 2}}

// model is the symbol of the one model every generated case drives.
const model = "M"

// ActionKind names a client action the generator knows.
type ActionKind string

// The client actions.
const (
	AInfer      ActionKind = "infer"
	APut        ActionKind = "put"
	ALoad       ActionKind = "load"
	AUnload     ActionKind = "unload"
	ADelete     ActionKind = "delete"
	ABulk       ActionKind = "bulk"
	ARelease    ActionKind = "release"
	ADisconnect ActionKind = "disconnect"
)

// Action is one client action with its parameter.
type Action struct {
	Kind  ActionKind
	Slots int // APut
}

// Label names the action in a pair and a case name.
func (a Action) Label() string {
	if a.Kind == APut {
		return fmt.Sprintf("put%d", a.Slots)
	}
	return string(a.Kind)
}

// budget is what a path has used of the bound.
type budget struct{ req, mgr, bulk, rel int }

// call is one client call a path made, named cN in the case.
type call struct {
	name   string
	kind   ActionKind
	ticket uint64
	gate   string // AInfer: the fixture gate that holds it while it runs
	sync   bool   // answered within its own step (a synchronous step)
	// what the spec answered it: done (granted or finished), code for a
	// rejection, ver the config version that served or committed it.
	answered bool
	code     core.Code
	ver      uint64
	cancel   bool             // disconnected
	bulk     *core.BulkResult // ABulk: its answer
}

// node is a state reached by a path of client actions.
type node struct {
	s     *abstract.State
	b     budget
	calls []call
	steps []string // the case steps of the path
}

func (n *node) clone() *node {
	return &node{s: n.s, b: n.b, calls: slices.Clone(n.calls), steps: slices.Clone(n.steps)}
}

// Case is one generated conformance case.
type Case struct {
	Name  string
	State string     // the state's description
	Life  core.State // M's state before the action
	Gone  bool       // M was unregistered before the action
	Never bool       // M was never registered before the action
	Act   Action
	Steps []string
	ActAt int // the index of the action's step in Steps
}

// Result is a walk's cases and counts.
type Result struct {
	Cases []Case
	// States is the number of distinct spec states reached; Pairs the
	// (state, action) pairs enabled in them; Open those whose outcome the
	// spec leaves open; Unobservable those a case could not pin.
	States, Pairs, Open, Unobservable int
	// PairKeys are the generated pairs (state key + action label).
	PairKeys map[string]bool
	// AllPairs are every enabled pair of the walk.
	AllPairs map[string]bool
}

// Params are the spec constants of the conformance suite's shared server:
// no residency limit, no default admission timeout, load backoff on.
func Params() abstract.Params {
	return abstract.Params{LoadBackoff: true}
}

// Configs interns the fixture config of n slots as the server registers it.
func config(t *abstract.ConfigTable, slots int) *abstract.Config {
	return t.Intern(abstract.Config{Task: "tts", Engine: "fixture", Slots: slots})
}

// Walk explores the spec within b and returns the cases.
func Walk(b Bound) (*Result, error) {
	p := Params()
	t := abstract.NewConfigTable()
	res := &Result{PairKeys: map[string]bool{}, AllPairs: map[string]bool{}}
	seen := map[string]bool{}
	start := &node{s: &abstract.State{}}
	queue := []*node{start}
	seen[nodeKey(start)] = true
	states := map[string]bool{}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		sk := string(n.s.AppendKey(nil, false))
		states[sk] = true
		for _, a := range actions(n, b) {
			pk := sk + "|" + a.Label()
			firstPair := !res.AllPairs[pk]
			res.AllPairs[pk] = true
			next, why, err := apply(n, a, &p, t)
			if err != nil {
				return nil, err
			}
			if next == nil {
				if firstPair {
					switch why {
					case "open":
						res.Open++
					default:
						res.Unobservable++
					}
				}
				continue
			}
			if firstPair && !res.PairKeys[pk] {
				c, err := finish(n, next, a, &p, t)
				if err != nil {
					return nil, err
				}
				if c != nil {
					res.PairKeys[pk] = true
					c.Name = fmt.Sprintf("gen.%03d.%s", len(res.Cases)+1, a.Label())
					res.Cases = append(res.Cases, *c)
				} else {
					res.Unobservable++
				}
			}
			if k := nodeKey(next); !seen[k] {
				seen[k] = true
				queue = append(queue, next)
			}
		}
	}
	res.States, res.Pairs = len(states), len(res.AllPairs)
	return res, nil
}

// nodeKey is the state's key and the budget used: two paths to one state
// with budget left alike have the same future.
func nodeKey(n *node) string {
	return fmt.Sprintf("%s|%d.%d.%d.%d", n.s.AppendKey(nil, false), n.b.req, n.b.mgr, n.b.bulk, n.b.rel)
}

// actions returns the client actions enabled in n within b. Interchangeable
// clients get one action: only the first running request is released and
// only the first queued request disconnected.
func actions(n *node, b Bound) []Action {
	var out []Action
	if n.b.req < b.Requests {
		out = append(out, Action{Kind: AInfer})
	}
	if n.b.mgr < b.Managers {
		for _, s := range b.Slots {
			out = append(out, Action{Kind: APut, Slots: s})
		}
		out = append(out, Action{Kind: ALoad}, Action{Kind: AUnload}, Action{Kind: ADelete})
	}
	if n.b.bulk < b.Bulks {
		out = append(out, Action{Kind: ABulk})
	}
	if n.b.rel < b.Releases {
		if running(n.s) != 0 {
			out = append(out, Action{Kind: ARelease})
		}
		if queuedRequest(n.s) != 0 {
			out = append(out, Action{Kind: ADisconnect})
		}
	}
	return out
}

// running returns the ticket of the first running request (arrival order).
func running(s *abstract.State) uint64 {
	i := s.Lookup(model)
	if i < 0 {
		return 0
	}
	var best *abstract.Holder
	for k := range s.Models[i].Holders {
		h := &s.Models[i].Holders[k]
		if !h.Wait && (best == nil || h.Seq < best.Seq) {
			best = h
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}

// queuedRequest returns the ticket of the first queued request.
func queuedRequest(s *abstract.State) uint64 {
	i := s.Lookup(model)
	if i < 0 {
		return 0
	}
	for _, e := range s.Models[i].Queue {
		if e.Kind == abstract.KReq {
			return e.ID
		}
	}
	return 0
}

// String describes a state for a case's comment.
func describe(s *abstract.State) string {
	i := s.Entry(model)
	if i < 0 {
		return "M never registered"
	}
	md := &s.Models[i]
	if md.Gone {
		return fmt.Sprintf("M unregistered (tombstone at version %d)", md.Ver)
	}
	var q []string
	for _, e := range md.Queue {
		switch e.Kind {
		case abstract.KReq:
			q = append(q, "request")
		case abstract.KMember:
			q = append(q, "bulk")
		default:
			q = append(q, e.Op.String())
		}
	}
	d := fmt.Sprintf("M %s, %d slot(s), version %d, %d running", md.Life, md.Cfg.Slots, md.Ver, md.Active())
	if len(q) > 0 {
		d += ", queued: " + strings.Join(q, ", ")
	}
	return d
}
