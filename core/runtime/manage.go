package runtime

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/core"
)

// Apply registers model id with spec, or reconfigures it when it is known,
// and loads it (PUT /v1/models/{id}). The spec is validated completely,
// engine included, before anything live changes. It returns the model's
// status as of the scheduler step that finished the operation: an atomic
// snapshot taken right after it, which can already show the start of the
// next operation queued on the model (for example an unload behind it).
// It is Prepare and then ApplyPrepared.
func (r *Runtime) Apply(ctx context.Context, id string, spec ModelSpec) (core.ModelStatus, error) {
	p, err := r.Prepare(id, spec)
	if err != nil {
		return core.ModelStatus{}, err
	}
	return r.ApplyPrepared(ctx, p)
}

// Load loads model id if it is not loaded (POST /v1/models/{id}/load) and
// returns its status as of the step that finished the load (see Apply).
func (r *Runtime) Load(ctx context.Context, id string) (core.ModelStatus, error) {
	return r.manage(ctx, id, core.OpLoad, nil)
}

// Unload unloads model id (POST /v1/models/{id}/unload); unloading an
// unloaded model succeeds. It returns the status as of the step that
// finished the unload (see Apply).
func (r *Runtime) Unload(ctx context.Context, id string) (core.ModelStatus, error) {
	return r.manage(ctx, id, core.OpUnload, nil)
}

// Unregister removes model id from the registry (DELETE /v1/models/{id},
// CONTRACT.md unreg.*): a barrier like Unload, so work admitted before it
// drains and its pool is torn down; then the ID is unknown, the tickets
// queued behind it are answered not found, and a later Apply registers it
// again past its last config version. An unknown ID is ErrNotFound. It
// returns the model's last status (unloaded) and its config version.
func (r *Runtime) Unregister(ctx context.Context, id string) (core.ModelStatus, error) {
	return r.manage(ctx, id, core.OpUnregister, nil)
}

// RestoreUnregistered records id as unregistered at config version
// version (at least 1): the tombstone of a model that was unregistered
// before a restart, restored from the persistent registry so that a later
// Apply registers the ID past version (CONTRACT.md unreg.persisted). It
// registers the ID unloaded with a placeholder config that is never
// loaded, then unregisters it. An ID that is registered is refused as
// invalid.
func (r *Runtime) RestoreUnregistered(ctx context.Context, id string, version uint64) error {
	if _, err := r.StatusOf(id); err == nil {
		return &Error{Code: core.CodeInvalid, Msg: fmt.Sprintf("model %q is registered; it has no tombstone to restore", id)}
	}
	cfg := &core.Config{Task: "unregistered", Slots: 1, AdmissionTimeout: core.NoTimeout, BaseVersion: max(version, 1),
		RegisterOnly: true}
	if _, err := r.manage(ctx, id, core.OpApply, cfg); err != nil {
		return err
	}
	_, err := r.manage(ctx, id, core.OpUnregister, nil)
	return err
}

// Entries returns the scheduler's registry entries: the registered models
// and the tombstones of unregistered ones (the server bounds both).
func (r *Runtime) Entries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Len()
}

// Unregistered reports whether id has a tombstone (it was unregistered and
// not registered again).
func (r *Runtime) Unregistered(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.m.Entry(id)
	return ok && r.m.Unregistered(h)
}

// BulkUnload unloads every registered model of ids (POST /v1/models/unload):
// their barriers are published in one step, ready-idle models are freed
// first, and unknown IDs are reported in NotFound without failing the
// others. Bulk waits are unbounded.
func (r *Runtime) BulkUnload(ctx context.Context, ids []string) (core.BulkResult, error) {
	_, o, err := r.submitAndWait(ctx, "", kindBulk, &core.Event{Kind: core.EvSubmitBulkUnload, Models: ids}, "", nil)
	if err != nil {
		return core.BulkResult{}, err
	}
	if o.kind != core.EfDone {
		return core.BulkResult{}, rejectError("", o.code, o.cause)
	}
	return *o.bulk, nil
}

// manage submits one targeted manager and waits for its Done or Reject.
func (r *Runtime) manage(ctx context.Context, id string, op core.Op, cfg *core.Config) (core.ModelStatus, error) {
	ev := core.Event{Kind: core.EvSubmitManager, Model: id, Op: op, Config: cfg, Timeout: core.NoTimeout}
	_, o, err := r.submitAndWait(ctx, id, kindManager, &ev, "", nil)
	if err != nil {
		return core.ModelStatus{}, err
	}
	if o.kind != core.EfDone {
		e := refused(id, o)
		e.Committed = o.committed
		return core.ModelStatus{}, e
	}
	if o.status == nil {
		return core.ModelStatus{}, nil
	}
	return *o.status, nil
}

// TombstoneFactor bounds the scheduler's entries, tombstones of
// unregistered models included, at this many times Options.MaxModels.
const TombstoneFactor = 2

// CapError is a registration refused for Options.MaxModels (CONTRACT.md
// err.max-models); Tombstones says the bound on registered plus
// unregistered IDs refused it.
type CapError struct {
	Model      string
	Max        int
	Tombstones bool
}

func (e *CapError) Error() string {
	if e.Tombstones {
		return fmt.Sprintf("model %q not registered: the server keeps the last config_version of every unregistered model, and registered plus unregistered models reached %d (%d times --max-models); re-registering an unregistered ID is allowed",
			e.Model, TombstoneFactor*e.Max, TombstoneFactor)
	}
	return fmt.Sprintf("model %q not registered: the server already has its --max-models limit of %d models (reconfiguring one of them is allowed)", e.Model, e.Max)
}

// capLocked refuses an Apply that would register a new ID past
// Options.MaxModels, in the critical section that registers it: the core
// registers an unknown ID when its Apply is submitted, so registrations in
// flight are counted and concurrent ones never overshoot. Reconfiguring a
// registered model and restoring the state dir (RegisterOnly) are never
// refused. A tombstone frees its place but stays an entry: entries are
// bounded at TombstoneFactor times the cap, past which only IDs with a
// tombstone register again. Call with mu held.
func (r *Runtime) capLocked(ev *core.Event) error {
	if r.maxModels == 0 || ev.Kind != core.EvSubmitManager || ev.Op != core.OpApply || ev.Config == nil || ev.Config.RegisterOnly {
		return nil
	}
	h, known := r.m.Entry(ev.Model)
	if known && !r.m.Unregistered(h) {
		return nil // a reconfigure
	}
	registered := 0
	for e := range r.m.Len() {
		if !r.m.Unregistered(core.Handle(e)) {
			registered++
		}
	}
	if registered >= r.maxModels {
		return &Error{Code: core.CodeInvalid, Msg: (&CapError{Model: ev.Model, Max: r.maxModels}).Error(), Err: &CapError{Model: ev.Model, Max: r.maxModels}}
	}
	if !known && r.m.Len() >= TombstoneFactor*r.maxModels {
		ce := &CapError{Model: ev.Model, Max: r.maxModels, Tombstones: true}
		return &Error{Code: core.CodeInvalid, Msg: ce.Error(), Err: ce}
	}
	return nil
}
