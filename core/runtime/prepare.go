package runtime

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/core"
)

// Prepared is a model spec checked completely for one model ID, ready to
// commit: the validator's fields (ModelSpec.Validate), the engine's
// Check (one resolve of its options, the memory estimate) and the voice
// map, converted into the core's config. Prepare makes one; ApplyPrepared
// commits it without checking it again, so a caller that must act between
// the check and the commit (the server's persistent registry writes the
// change's intent there) runs the validator and the engine's resolve once
// per registration, not once for itself and once more in Apply. What it
// does not check is what only the commit can decide: the names against
// the other models' (NameError), the --max-models cap, and the live
// config it may equal.
//
// The zero Prepared is not a checked spec: ApplyPrepared refuses it, and
// one made by another Runtime.
type Prepared struct {
	rt  *Runtime
	id  string
	cfg core.Config
}

// Prepare validates spec for model id completely, engine included, as
// Apply does before anything live changes, and returns it checked. It
// reads no live state: a Prepared stays valid however the registry
// changes before it is applied. A refusal is Apply's (a *Error of code
// invalid, wrapping the *SpecError that names the field).
func (r *Runtime) Prepare(id string, spec ModelSpec) (Prepared, error) {
	cfg, err := r.config(id, spec)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{rt: r, id: id, cfg: *cfg}, nil
}

// ID returns the model ID the spec was prepared for.
func (p Prepared) ID() string { return p.id }

// Config returns the checked config in the core's encoding: canonical
// options, aliases and voice map, the engine's memory estimate, and the
// registration-only BaseVersion and RegisterOnly of the spec. It is the
// config ApplyPrepared submits, so what a caller records from it is what
// the commit, if any, commits.
func (p Prepared) Config() core.Config { return p.cfg }

// ApplyPrepared is Apply with the spec already checked by Prepare: it
// registers or reconfigures the model and loads it, and returns what
// Apply returns.
func (r *Runtime) ApplyPrepared(ctx context.Context, p Prepared) (core.ModelStatus, error) {
	if p.rt != r {
		return core.ModelStatus{}, &Error{Code: core.CodeInvalid, Msg: fmt.Sprintf("model %q: the spec was not prepared by this runtime", p.id)}
	}
	cfg := p.cfg // the machine keeps the pointer it is given: each commit gets its own copy
	return r.manage(ctx, p.id, core.OpApply, &cfg)
}

// NamesTaken reports whether the names of p (its model ID, when it
// would register a new model, and its aliases) are taken now by another
// model, registered or being applied: the refusal (a *Error wrapping a
// *NameError) that applying p would get if nothing changed first. Nil:
// none is taken now; the commit still decides (names.go).
func (r *Runtime) NamesTaken(p Prepared) error {
	if p.rt != r {
		return nil
	}
	cfg := p.cfg
	ev := core.Event{Kind: core.EvSubmitManager, Model: p.id, Op: core.OpApply, Config: &cfg}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.namesLocked(&ev)
}
