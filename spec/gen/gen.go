// Package gen generates conformance cases from the spec's state graph:
// it walks spec/abstract from an empty registry through the actions a
// client of the HTTP API can cause on one model (inference held
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
// A second walk (TwoBound) drives two models on a server of their own with
// --max-loaded-models 1, every completion order of their backend jobs
// explored.
//
// To extend the generated matrices, add an action to actions (with its
// translation into steps in apply) or a walk to Bounds; `make generate-cases`
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

// Bound limits the walk: which models, the server's residency limit, and
// how many of each client action one path may take.
type Bound struct {
	Name      string   // the generated cases' name prefix
	Models    []string // model symbols
	MaxLoaded int      // --max-loaded-models of the cases' own server (0: the shared server, no limit)
	// NoBackoff runs the own server without a load backoff: the spec's
	// backoff lasts until a Tick, the server's one second, so a case
	// slower than that would see the server end it.
	NoBackoff bool
	Requests  int // inference requests
	Managers  int // put, load, unload and delete together (the first puts included)
	Bulks     int // bulk unloads (of every model at once)
	Releases  int // releases and disconnects together
	Slots     []int
}

// DefaultBound is the one-model walk `make generate-cases` writes.
var DefaultBound = Bound{Name: "gen", Models: []string{model}, Requests: 2, Managers: 2, Bulks: 1, Releases: 2, Slots: []int{1, 2}}

// TwoBound is the two-model walk under --max-loaded-models 1: residency,
// eviction and the loader queue between two models (CONTRACT.md res.*).
var TwoBound = Bound{Name: "gen.two", Models: []string{model, "N"}, MaxLoaded: 1, NoBackoff: true, Requests: 2, Managers: 3, Bulks: 0,
	Releases: 1, Slots: []int{1}}

// Bounds are the walks gen.yaml holds, in order.
var Bounds = []Bound{DefaultBound, TwoBound}

// model is the symbol of the first model every generated case drives.
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

// Action is one client action with its parameters.
type Action struct {
	Kind  ActionKind
	Model string // the model symbol ("" for a bulk: every model)
	Slots int    // APut
}

// Label names the action in a pair and a case name (the model's symbol
// after a dot unless it is M).
func (a Action) Label() string {
	l := string(a.Kind)
	if a.Kind == APut {
		l = fmt.Sprintf("put%d", a.Slots)
	}
	if a.Model != "" && a.Model != model {
		l += "." + a.Model
	}
	return l
}

// budget is what a path has used of the bound.
type budget struct{ req, mgr, bulk, rel int }

// call is one client call a path made, named cN in the case.
type call struct {
	name   string
	kind   ActionKind
	ticket uint64
	model  string // the model symbol ("" for a bulk)
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
	Name   string
	Server string     // the server: line ("" for the shared server)
	State  string     // the state's description
	Life   core.State // M's state before the action
	Gone   bool       // M was unregistered before the action
	Never  bool       // M was never registered before the action
	Two    bool       // a two-model walk's case
	Act    Action
	Steps  []string
	ActAt  int // the index of the action's step in Steps
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

// Params are the spec constants of the cases' server: the suite's shared
// one (no residency limit) or one of their own with b's limit; no default
// admission timeout, load backoff on (the server's defaults).
func (b *Bound) Params() abstract.Params {
	return abstract.Params{LoadBackoff: !b.NoBackoff, MaxLoaded: b.MaxLoaded}
}

// Params are the spec constants of the conformance suite's shared server.
func Params() abstract.Params { return DefaultBound.Params() }

// Configs interns the fixture config of n slots as the server registers it.
func config(t *abstract.ConfigTable, slots int) *abstract.Config {
	return t.Intern(abstract.Config{Task: "tts", Engine: "fixture", Slots: slots})
}

// Walk explores the spec within b and returns the cases.
func Walk(b Bound) (*Result, error) {
	p := b.Params()
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
			next, why, err := apply(n, a, &b, &p, t)
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
				c, err := finish(n, next, a, &b, &p, t)
				if err != nil {
					return nil, err
				}
				if c != nil {
					res.PairKeys[pk] = true
					c.Name = fmt.Sprintf("%s.%03d.%s", b.Name, len(res.Cases)+1, strings.ToLower(a.Label()))
					if b.MaxLoaded > 0 {
						c.Server = fmt.Sprintf("{max_loaded_models: %d}", b.MaxLoaded)
						if b.NoBackoff {
							c.Server = fmt.Sprintf("{max_loaded_models: %d, load_backoff_ms: -1}", b.MaxLoaded)
						}
					}
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
	for _, m := range b.Models {
		if n.b.req < b.Requests {
			out = append(out, Action{Kind: AInfer, Model: m})
		}
		if n.b.mgr < b.Managers {
			for _, s := range b.Slots {
				out = append(out, Action{Kind: APut, Model: m, Slots: s})
			}
			out = append(out, Action{Kind: ALoad, Model: m}, Action{Kind: AUnload, Model: m}, Action{Kind: ADelete, Model: m})
		}
		if n.b.rel < b.Releases {
			if running(n.s, m) != 0 {
				out = append(out, Action{Kind: ARelease, Model: m})
			}
			if queuedRequest(n.s, m) != 0 {
				out = append(out, Action{Kind: ADisconnect, Model: m})
			}
		}
	}
	if n.b.bulk < b.Bulks {
		out = append(out, Action{Kind: ABulk})
	}
	return out
}

// running returns the ticket of model m's first running request (arrival order).
func running(s *abstract.State, m string) uint64 {
	i := s.Lookup(m)
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

// queuedRequest returns the ticket of model m's first queued request.
func queuedRequest(s *abstract.State, m string) uint64 {
	i := s.Lookup(m)
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

// describe describes the models of a state for a case's comment.
func describe(s *abstract.State, models []string) string {
	var ds []string
	for _, m := range models {
		ds = append(ds, describeModel(s, m))
	}
	return strings.Join(ds, "; ")
}

func describeModel(s *abstract.State, m string) string {
	i := s.Entry(m)
	if i < 0 {
		return m + " never registered"
	}
	md := &s.Models[i]
	if md.Gone {
		return fmt.Sprintf("%s unregistered (tombstone at version %d)", m, md.Ver)
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
	d := fmt.Sprintf("%s %s, %d slot(s), version %d, %d running", m, md.Life, md.Cfg.Slots, md.Ver, md.Active())
	if !md.Published && md.Life == core.Unloaded && md.Active() > 0 {
		d += " (waiting for residency)"
	}
	if len(q) > 0 {
		d += ", queued: " + strings.Join(q, ", ")
	}
	return d
}
