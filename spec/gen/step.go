package gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

// fixtureCapacity is what the fixture's load and probe advertise without a
// capacity option (backends/fixture.DefaultCapacity).
const fixtureCapacity = 16

// maxSettle bounds the backend completions after one client action.
const maxSettle = 64

// apply takes client action a in n: the spec's event action, then every
// backend completion until no job runs. It returns the next node with the
// action's steps and the observation of its outcome, or nil and why not
// ("open": the spec allows several outcomes; "unobservable": a case could
// not tell the outcome from the state before; "unexpressible": an answer
// the case language cannot check).
func apply(n *node, a Action, b *Bound, p *abstract.Params, t *abstract.ConfigTable) (*node, string, error) {
	next := n.clone()
	ticket := uint64(len(n.calls) + 1)
	ev := abstract.Action{Model: a.Model, Timeout: core.NoTimeout, Ticket: ticket}
	newCall := -1
	var target int // the call a release or disconnect acts on
	switch a.Kind {
	case AInfer:
		ev.Kind = core.EvSubmitRequest
		next.b.req++
	case APut, ALoad, AUnload, ADelete:
		ev.Kind, ev.Op = core.EvSubmitManager, map[ActionKind]core.Op{APut: core.OpApply, ALoad: core.OpLoad,
			AUnload: core.OpUnload, ADelete: core.OpUnregister}[a.Kind]
		if a.Kind == APut {
			ev.Cfg = config(t, a.Slots)
		}
		next.b.mgr++
	case ABulk:
		ev.Kind, ev.Models = core.EvSubmitBulkUnload, b.Models
		next.b.bulk++
	case ARelease, ADisconnect:
		ev.Kind, ev.Ticket = core.EvRelease, running(n.s, a.Model)
		if a.Kind == ADisconnect {
			ev.Kind, ev.Ticket, ev.Reason = core.EvCancel, queuedRequest(n.s, a.Model), core.ReasonDisconnect
		}
		next.b.rel++
		target = slices.IndexFunc(n.calls, func(c call) bool { return c.ticket == ev.Ticket })
		if target < 0 {
			return nil, "", fmt.Errorf("gen: %s of ticket %d: no such call", a.Kind, ev.Ticket)
		}
	}
	if ev.Kind != core.EvRelease && ev.Kind != core.EvCancel {
		newCall = len(next.calls)
		c := call{name: fmt.Sprintf("c%d", ticket), kind: a.Kind, ticket: ticket, model: a.Model}
		if a.Kind == AInfer {
			c.gate = fmt.Sprintf("g%d", ticket)
		}
		next.calls = append(next.calls, c)
	}
	out, why, err := settle(n.s, ev, b.Models, p)
	if err != nil || out == nil {
		return nil, why, err
	}
	next.s = out.State
	answered := next.record(out)
	if a.Kind == ARelease {
		next.calls[target].answered = true
		answered = append(answered, target)
	}
	if a.Kind == ADisconnect && !next.calls[target].cancel {
		return nil, "unexpressible", nil
	}
	// The action's own step: synchronous when the spec answers it at once.
	switch {
	case newCall >= 0:
		c := &next.calls[newCall]
		if c.answered && (c.kind != AInfer || c.code != core.CodeOK) {
			c.sync = true
			exp, ok := expectOf(c, next.s)
			if !ok {
				return nil, "unexpressible", nil
			}
			next.steps = append(next.steps, sendStep(c, a, b.Models, true, exp))
			answered = slices.DeleteFunc(answered, func(k int) bool { return k == newCall })
		} else {
			next.steps = append(next.steps, sendStep(c, a, b.Models, false, ""))
		}
	case a.Kind == ARelease:
		next.steps = append(next.steps, "open: "+n.calls[target].gate)
	default:
		next.steps = append(next.steps, "disconnect: "+n.calls[target].name)
	}
	// Then what the spec predicts: answers that came, then the model.
	waited := false
	for _, k := range answered {
		c := &next.calls[k]
		if c.sync {
			continue
		}
		exp, ok := expectOf(c, next.s)
		if !ok {
			return nil, "unexpressible", nil
		}
		next.steps = append(next.steps, fmt.Sprintf("await: {call: %s%s}", c.name, exp))
		waited = true
	}
	before, after := observe(n.s, b.Models), observe(next.s, b.Models)
	next.steps = append(next.steps, after...)
	if newCall >= 0 && !next.calls[newCall].sync && !waited && slices.Equal(before, after) {
		return nil, "unobservable", nil
	}
	return next, "", nil
}

// settle steps the spec by ev and then by every backend completion, in
// every order the jobs of different models may finish in. It returns the
// one quiescent outcome (the effects in one of those orders), or nil and
// "open" when the spec, or the order of the completions, allows more than
// one.
func settle(s *abstract.State, ev abstract.Action, models []string, p *abstract.Params) (*abstract.Outcome, string, error) {
	outs, err := abstract.Step(s, ev, p)
	if err != nil {
		return nil, "", fmt.Errorf("gen: %s: %w", ev.Kind, err)
	}
	finals := map[string]*abstract.Outcome{}
	var walk func(o abstract.Outcome, effs []abstract.Effect, depth int) error
	walk = func(o abstract.Outcome, effs []abstract.Effect, depth int) error {
		if depth > maxSettle {
			return fmt.Errorf("gen: backend jobs did not settle in %d steps", maxSettle)
		}
		busy := false
		for _, m := range models {
			i := o.State.Lookup(m)
			if i < 0 || o.State.Models[i].Job == abstract.JNone {
				continue
			}
			busy = true
			done := abstract.Action{Model: m}
			switch o.State.Models[i].Job {
			case abstract.JLoad:
				done.Kind, done.Capacity = core.EvLoadDone, fixtureCapacity
			case abstract.JClone:
				done.Kind = core.EvCloneDone
			case abstract.JProbe:
				done.Kind, done.Capacity = core.EvProbeDone, fixtureCapacity
			case abstract.JTeardown:
				done.Kind = core.EvTeardownDone
			}
			outs, err := abstract.Step(o.State, done, p)
			if err != nil {
				return fmt.Errorf("gen: %s: %w", done.Kind, err)
			}
			for _, x := range outs {
				if err := walk(x, append(slices.Clone(effs), x.Effects...), depth+1); err != nil {
					return err
				}
			}
		}
		if !busy {
			k := string(abstract.AppendEffectsKey(o.State.AppendKey(nil, false), effs))
			if finals[k] == nil {
				finals[k] = &abstract.Outcome{State: o.State, Effects: effs}
			}
		}
		return nil
	}
	for _, o := range outs {
		if err := walk(o, slices.Clone(o.Effects), 0); err != nil {
			return nil, "", err
		}
	}
	if len(finals) != 1 {
		return nil, "open", nil
	}
	for _, o := range finals {
		return o, "", nil
	}
	return nil, "", nil
}

// record notes the answers of out's effects in the calls and returns the
// calls answered.
func (n *node) record(out *abstract.Outcome) []int {
	var answered []int
	for _, e := range out.Effects {
		k := slices.IndexFunc(n.calls, func(c call) bool { return c.ticket == e.Ticket })
		if k < 0 {
			continue
		}
		c := &n.calls[k]
		switch e.Kind {
		case core.EfGrant:
			c.ver = e.Ver
		case core.EfDone:
			c.answered, c.bulk = true, e.Bulk
			if i := out.State.Lookup(c.model); i >= 0 && c.kind == APut {
				c.ver = out.State.Models[i].Ver
			}
			answered = append(answered, k)
		case core.EfReject:
			c.answered, c.code = true, e.Code
			c.cancel = e.Code == core.CodeCancelled
			answered = append(answered, k)
		}
	}
	return answered
}

// expectOf is what a case checks of an answered call's answer (the fields
// after "expect:" or "await: {call"), and false when the language cannot.
func expectOf(c *call, s *abstract.State) (string, bool) {
	switch {
	case c.cancel:
		return ", disconnected: true", true
	case c.code == core.CodeNotFound:
		return ", status: 404, error: not_found_error", true
	case c.code == core.CodeServerBusy:
		return ", status: 503, error: server_busy", true
	case c.code != core.CodeOK:
		return "", false
	}
	switch c.kind {
	case AInfer:
		return fmt.Sprintf(", body: {config_version: %d}", c.ver), true
	case APut:
		if c.ver == 0 {
			return "", true
		}
		return fmt.Sprintf(", body: {config_version: %d}", c.ver), true
	case ADelete:
		return ", body: {id: " + c.model + ", object: model, deleted: true}", true
	case ABulk:
		if c.bulk == nil {
			return "", false
		}
		return fmt.Sprintf(", body: {unloaded: [%s], not_found: [%s]}", strings.Join(c.bulk.Unloaded, ", "),
			strings.Join(c.bulk.NotFound, ", ")), true
	}
	return "", true
}

// sendStep is the step that sends call c: synchronous with expectation
// exp (none: 200), or asynchronous.
func sendStep(c *call, a Action, bulkModels []string, sync bool, exp string) string {
	tail := ", as: " + c.name
	switch {
	case sync && exp != "":
		tail = ", expect: {" + strings.TrimPrefix(exp, ", ") + "}"
	case sync:
		tail = ""
	}
	switch c.kind {
	case AInfer:
		if sync {
			return "infer: {model: " + c.model + tail + "}"
		}
		return fmt.Sprintf("infer: {model: %s, input: {gate: %s}%s}", c.model, c.gate, tail)
	case APut:
		return fmt.Sprintf("put: {model: %s, slots: %d%s}", c.model, a.Slots, tail)
	case ALoad, AUnload:
		return fmt.Sprintf("%s: {model: %s%s}", c.kind, c.model, tail)
	case ADelete:
		return "http: {method: DELETE, path: /v1/models/$" + c.model + tail + "}"
	case ABulk:
		return "bulk: {models: [" + strings.Join(bulkModels, ", ") + "]" + tail + "}"
	}
	return ""
}

// observe returns the steps that wait for the model fields the spec
// predicts in s (none for a model never registered).
func observe(s *abstract.State, models []string) []string {
	var out []string
	for _, m := range models {
		if o := observeModel(s, m); o != "" {
			out = append(out, o)
		}
	}
	return out
}

func observeModel(s *abstract.State, m string) string {
	i := s.Entry(m)
	if i < 0 {
		return ""
	}
	md := &s.Models[i]
	if md.Gone {
		return "absent: " + m
	}
	nMgr := 0
	for _, e := range md.Queue {
		if e.Kind != abstract.KReq {
			nMgr++
		}
	}
	return fmt.Sprintf("await_model: {model: %s, state: %s, loaded: %t, slots: %d, active_slots: %d, queued_requests: %d, queued_managers: %d, config_version: %d}",
		m, md.Life, md.Published, md.Cfg.Slots, md.Active(), md.QueuedRequests(), nMgr, md.Ver)
}

// finish completes the case of action a taken in n (reaching next): it
// releases every running request, in arrival order, until nothing runs,
// then checks that every call was answered. It returns nil when a call
// stays unanswered or an answer cannot be checked.
func finish(n, next *node, a Action, b *Bound, p *abstract.Params, t *abstract.ConfigTable) (*Case, error) {
	cur := next.clone()
	cur.b = budget{}
	for range 16 {
		// The first model with a running request, in the bound's order.
		m := ""
		for _, x := range b.Models {
			if running(cur.s, x) != 0 {
				m = x
				break
			}
		}
		if m == "" {
			break
		}
		nx, _, err := apply(cur, Action{Kind: ARelease, Model: m}, b, p, t)
		if err != nil {
			return nil, err
		}
		if nx == nil {
			return nil, nil
		}
		cur = nx
	}
	for _, c := range cur.calls {
		if !c.answered {
			return nil, nil
		}
	}
	target := a.Model
	if target == "" {
		target = b.Models[0]
	}
	c := &Case{State: describe(n.s, b.Models), Act: a, Steps: slices.Clone(cur.steps), ActAt: len(n.steps), Life: core.Unloaded,
		Never: true, Two: len(b.Models) > 1}
	if i := n.s.Entry(target); i >= 0 {
		c.Life, c.Gone, c.Never = n.s.Models[i].Life, n.s.Models[i].Gone, false
	}
	return c, nil
}
