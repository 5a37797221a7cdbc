package runtime

import (
	"context"

	"github.com/sluice-dev/sluice/core"
)

// Apply registers model id with spec, or reconfigures it when it is known,
// and loads it (PUT /v1/models/{id}). The spec is validated completely,
// engine included, before anything live changes. It returns the model's
// status as of the scheduler step that finished the operation: an atomic
// snapshot taken right after it, which can already show the start of the
// next operation queued on the model (for example an unload behind it).
func (r *Runtime) Apply(ctx context.Context, id string, spec ModelSpec) (core.ModelStatus, error) {
	cfg, err := r.config(id, spec)
	if err != nil {
		return core.ModelStatus{}, err
	}
	return r.manage(ctx, id, core.OpApply, cfg)
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

// BulkUnload unloads every registered model of ids (POST /v1/models/unload):
// their barriers are published in one step, ready-idle models are freed
// first, and unknown IDs are reported in NotFound without failing the
// others. Bulk waits are unbounded.
func (r *Runtime) BulkUnload(ctx context.Context, ids []string) (core.BulkResult, error) {
	_, o, err := r.submitAndWait(ctx, "", kindBulk, &core.Event{Kind: core.EvSubmitBulkUnload, Models: ids}, "")
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
	_, o, err := r.submitAndWait(ctx, id, kindManager, &ev, "")
	if err != nil {
		return core.ModelStatus{}, err
	}
	if o.kind != core.EfDone {
		return core.ModelStatus{}, refused(id, o)
	}
	if o.status == nil {
		return core.ModelStatus{}, nil
	}
	return *o.status, nil
}
