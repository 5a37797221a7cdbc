package runtime

import (
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// A model's names are its ID and its aliases (ModelSpec.Aliases), which
// live in its committed config (core.Config.Aliases) and so change,
// version and persist with it. Every request names a model by either;
// the runtime resolves the name in the critical section that submits the
// request and checks it again under the granted lease (acquire): a
// request that queued behind a PUT taking the alias off its model is
// submitted again where the name leads now, so a lease is always on a
// model the name names while the lease is held (CONTRACT.md
// names.alias-resolve). Conflicts are decided in the critical section
// that submits the Apply (names.alias-conflict): a name is taken when it
// is a registered ID, a committed alias, or an alias a live Apply
// claims, so two Applies in flight can never commit one alias twice.
//
// Committed aliases change only while an Apply ticket is live (its
// claim), so the runtime keeps:
//
//   - claims: the aliases of every live Apply ticket, dropped when its
//     Done or Reject is routed;
//   - hints: alias -> model ID, recomputed for a model from its committed
//     config when one of its claims is dropped (hinted: the aliases
//     hinted per model, so that costs the model's aliases only).
//
// A committed alias is in hints or in a live claim of its model, so
// those are the candidates of a lookup; each candidate is verified
// against the committed config, so stale hints are harmless.

// nameClaim is what one live Apply ticket claims: its model and the
// aliases of its config.
type nameClaim struct {
	id      string
	aliases []string
}

// NameError is an Apply refused because a name it asks for is taken: an
// alias that is another model's ID or alias, or a new model ID that is
// another model's alias (CONTRACT.md names.alias-conflict).
type NameError struct {
	Model string // the model the Apply was for
	Name  string // the name already taken
	Owner string // the model that holds it
	// IsID says Name is Owner's own ID (else one of its aliases).
	IsID bool
	// Field is the spec field at fault: FieldAliases, or "model" when
	// the model's own ID is another model's alias.
	Field string
}

func (e *NameError) Error() string {
	if e.Field != FieldAliases {
		return fmt.Sprintf("model %q cannot be registered: %q is an alias of model %q (remove it there first)", e.Model, e.Name, e.Owner)
	}
	if e.IsID {
		return fmt.Sprintf("aliases: %q is the ID of model %q", e.Name, e.Owner)
	}
	return fmt.Sprintf("aliases: %q is already an alias of model %q (remove it there first)", e.Name, e.Owner)
}

// hasAlias reports whether the canonical alias list list has name.
func hasAlias(list, name string) bool {
	for list != "" {
		a, rest, _ := strings.Cut(list, ",")
		if a == name {
			return true
		}
		list = rest
	}
	return false
}

// aliasOfLocked reports whether registered model id's committed config
// has alias name, and returns its handle.
func (r *Runtime) aliasOfLocked(id, name string) (core.Handle, bool) {
	h, ok := r.m.Lookup(id)
	if !ok || !hasAlias(r.m.Config(h).Aliases, name) {
		return 0, false
	}
	return h, true
}

// resolveLocked resolves a request's model name: a registered ID, else a
// committed alias. Call with mu held.
func (r *Runtime) resolveLocked(name string) (core.Handle, string, bool) {
	if h, ok := r.m.Lookup(name); ok {
		return h, name, true
	}
	if id, ok := r.hints[name]; ok {
		if h, ok := r.aliasOfLocked(id, name); ok {
			return h, id, true
		}
	}
	for _, c := range r.claims {
		for _, a := range c.aliases {
			if a == name {
				if h, ok := r.aliasOfLocked(c.id, name); ok {
					return h, c.id, true
				}
			}
		}
	}
	return 0, "", false
}

// Resolve returns the model ID a request's model name means now: the name
// itself when it is a registered ID, else the model whose committed
// aliases have it. Requests resolve in their admission (Acquire, Infer);
// this is for reads that name a model (GET /v1/models/{id}).
func (r *Runtime) Resolve(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, id, ok := r.resolveLocked(name)
	return id, ok
}

// ownerLocked returns the model other than self that holds alias name,
// committed or claimed by a live Apply.
func (r *Runtime) ownerLocked(name, self string) (string, bool) {
	if id, ok := r.hints[name]; ok && id != self {
		if _, ok := r.aliasOfLocked(id, name); ok {
			return id, true
		}
	}
	for _, c := range r.claims {
		if c.id == self {
			continue
		}
		for _, a := range c.aliases {
			if a == name {
				return c.id, true
			}
		}
	}
	return "", false
}

// namesLocked refuses an Apply whose names are taken (see NameError), in
// the critical section that submits it. Call with mu held.
func (r *Runtime) namesLocked(ev *core.Event) error {
	if ev.Kind != core.EvSubmitManager || ev.Op != core.OpApply || ev.Config == nil {
		return nil
	}
	id := ev.Model
	refuse := func(ne *NameError) error {
		return &Error{Code: core.CodeInvalid, Msg: ne.Error(), Err: &SpecError{Field: ne.Field, Reason: ne.Error(), Err: ne}}
	}
	if _, ok := r.m.Lookup(id); !ok {
		if owner, ok := r.ownerLocked(id, id); ok {
			return refuse(&NameError{Model: id, Name: id, Owner: owner, Field: "model"})
		}
	}
	for _, a := range splitAliases(ev.Config.Aliases) {
		if _, ok := r.m.Lookup(a); ok {
			return refuse(&NameError{Model: id, Name: a, Owner: a, IsID: true, Field: FieldAliases})
		}
		if owner, ok := r.ownerLocked(a, id); ok {
			return refuse(&NameError{Model: id, Name: a, Owner: owner, Field: FieldAliases})
		}
	}
	return nil
}

// claimLocked records the aliases Apply ticket tk claims until its Done or
// Reject (dropClaimLocked). Call with mu held, before the ticket's effects
// are routed.
func (r *Runtime) claimLocked(ev *core.Event, tk core.Ticket) {
	if ev.Kind != core.EvSubmitManager || ev.Op != core.OpApply || ev.Config == nil {
		return
	}
	if r.claims == nil {
		r.claims = map[core.Ticket]nameClaim{}
	}
	r.claims[tk] = nameClaim{id: ev.Model, aliases: splitAliases(ev.Config.Aliases)}
}

// dropClaimLocked ends ticket tk's claim, if it has one, and recomputes
// its model's hints from the committed config. Call with mu held.
func (r *Runtime) dropClaimLocked(tk core.Ticket) {
	c, ok := r.claims[tk]
	if !ok {
		return
	}
	delete(r.claims, tk)
	for _, a := range r.hinted[c.id] {
		if r.hints[a] == c.id {
			delete(r.hints, a)
		}
	}
	delete(r.hinted, c.id)
	h, ok := r.m.Lookup(c.id)
	if !ok {
		return
	}
	aliases := splitAliases(r.m.Config(h).Aliases)
	if len(aliases) == 0 {
		return
	}
	if r.hints == nil {
		r.hints, r.hinted = map[string]string{}, map[string][]string{}
	}
	for _, a := range aliases {
		r.hints[a] = c.id
	}
	r.hinted[c.id] = aliases
}

// resolveName is resolveLocked keeping name when it resolves to nothing
// (the core then refuses the unknown ID). Call with mu held.
func (r *Runtime) resolveName(name string) (core.Handle, string, bool) {
	if h, id, ok := r.resolveLocked(name); ok {
		return h, id, true
	}
	return 0, name, false
}
