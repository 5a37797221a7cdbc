package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// Registry runs the runtime's management operations with their
// durability: each one that succeeds has its committed result recorded
// (written and fsynced) before it returns, and one whose record fails
// returns a *NotDurableError, never success (CONTRACT.md
// persist.durable-before-200). Whether a refused change committed anyway
// is the runtime's answer (runtime.Committed), never a guess from versions
// read before and after. Without a state dir (a nil Store) it records
// nothing.
type Registry struct {
	rt    *runtime.Runtime
	store *Store
	log   *slog.Logger
	// applying counts the Applies in flight per model ID (guarded by the
	// store's mu): only one that overlaps no other is announced.
	applying map[string]int
}

// New returns the registry of rt on store (nil: no --state-dir).
func New(rt *runtime.Runtime, store *Store, log *slog.Logger) *Registry {
	return &Registry{rt: rt, store: store, log: log, applying: map[string]int{}}
}

// Store returns the registry's store (nil without a state dir).
func (g *Registry) Store() *Store { return g.store }

// NotDurableError is a change that is live but could not be recorded: the
// answer is 500, and the change will not survive a restart.
type NotDurableError struct{ Err error }

func (e *NotDurableError) Error() string {
	return "the change was applied but could not be made durable in --state-dir; it will not survive a restart: " + e.Err.Error()
}

// Unwrap returns the write's error.
func (e *NotDurableError) Unwrap() error { return e.Err }

// NotDurable reports whether err is a change that could not be recorded.
func NotDurable(err error) bool {
	var e *NotDurableError
	return errors.As(err, &e)
}

func notDurable(err error) error {
	if err == nil {
		return nil
	}
	return &NotDurableError{Err: err}
}

// Apply registers or reconfigures model id and loads it (runtime.Apply).
// A refusal that came after the commit (the new config's load failed) is
// recorded too, and returned as it is (CONTRACT.md persist.committed-only).
//
// A change that will commit a new config_version is announced first
// (announce): its record at that version is written as an intent before
// the runtime commits it, so that the version, once the runtime shows it,
// is never given to another config, even when the record after the commit
// cannot be written and the server restarts (a start rolls the intent
// forward; CONTRACT.md persist.version-continues). An announcement that
// cannot be written refuses the change before anything is live.
//
// The spec is checked once (runtime.Prepare: the validator and the
// engine's resolve of its options), before anything is written: a spec
// the runtime refuses writes nothing. The intent is the prepared config's
// record, and the runtime commits that same prepared config
// (runtime.ApplyPrepared), without checking it again.
func (g *Registry) Apply(ctx context.Context, id string, spec runtime.ModelSpec) (core.ModelStatus, error) {
	p, err := g.rt.Prepare(id, spec)
	if err != nil {
		return core.ModelStatus{}, err
	}
	intent, err := g.announce(p)
	if err != nil {
		return core.ModelStatus{}, err
	}
	st, err := g.rt.ApplyPrepared(ctx, p)
	if err != nil {
		if rerr := g.settle(id, intent, runtime.Committed(err)); rerr != nil {
			g.log.Error("committed change not durable", "model", id, "err", rerr)
		}
		return st, err
	}
	return st, notDurable(g.settle(id, intent, true))
}

// Load loads model id (runtime.Load) and records its desired state.
func (g *Registry) Load(ctx context.Context, id string) (core.ModelStatus, error) {
	st, err := g.rt.Load(ctx, id)
	if err != nil {
		return st, err
	}
	return st, notDurable(g.Record(id))
}

// Unload unloads model id (runtime.Unload) and records its desired state.
func (g *Registry) Unload(ctx context.Context, id string) (core.ModelStatus, error) {
	st, err := g.rt.Unload(ctx, id)
	if err != nil {
		return st, err
	}
	return st, notDurable(g.Record(id))
}

// BulkUnload unloads the models of ids (runtime.BulkUnload) and records
// the unloaded ones in one write.
func (g *Registry) BulkUnload(ctx context.Context, ids []string) (core.BulkResult, error) {
	res, err := g.rt.BulkUnload(ctx, ids)
	if err != nil {
		return res, err
	}
	return res, notDurable(g.Record(res.Unloaded...))
}

// Unregister removes model id (runtime.Unregister) and records its
// tombstone at its last config version (CONTRACT.md unreg.persisted). A
// registration of the ID that already committed a later version (a PUT
// that ran right after) is left as it is: the record never goes backwards.
func (g *Registry) Unregister(ctx context.Context, id string) (core.ModelStatus, error) {
	st, err := g.rt.Unregister(ctx, id)
	if err != nil {
		return st, err
	}
	if g.store == nil {
		return st, nil
	}
	s := g.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, known := s.get(id); known && old.ConfigVersion > st.ConfigVersion {
		return st, nil
	}
	if _, _, err := g.rt.ConfigOf(id); err == nil {
		return st, nil // registered again since: that registration records itself
	}
	m := Model{ID: id, ConfigVersion: st.ConfigVersion, Unregistered: true, Options: json.RawMessage("{}")}
	if old, known := s.get(id); known && old.equal(&m) {
		return st, nil
	}
	return st, notDurable(s.commit(change{Models: []Model{m}}))
}

// SetRoot makes a new models root durable; the caller swaps it in only
// once it is (CONTRACT.md persist.models-root).
func (g *Registry) SetRoot(root string) error {
	if g.store == nil {
		return nil
	}
	s := g.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root == root {
		return nil
	}
	return notDurable(s.commit(change{ModelsRoot: &root}))
}

// Record makes the committed state of every model of ids durable: its
// committed config, config_version and desired residency as the runtime
// has them now (the change's own or a later one, never an older one). The
// desired residency is the core's (ModelStatus.WantLoaded: what the last
// successful manager on the model left), so two changes of one model that
// overlap in time are recorded in the order the model's queue ran them,
// whichever records last. An ID that is not registered is skipped. The
// store's lock is held across the runtime reads and the write, so records
// land in the order they were read.
func (g *Registry) Record(ids ...string) error {
	if g.store == nil {
		return nil
	}
	s := g.store
	s.mu.Lock()
	defer s.mu.Unlock()
	c := g.recordChange(ids...)
	if len(c.Models) == 0 {
		return nil
	}
	return s.commit(c)
}

// recordChange is Record's change: the records of ids that differ from
// what is recorded, and the settling of each one's intent that the record
// covers (its version reached, and no Apply of it in flight). Call with
// the store's mu held.
func (g *Registry) recordChange(ids ...string) change {
	s := g.store
	var c change
	for _, id := range ids {
		cfg, status, err := g.rt.ConfigOf(id)
		if err != nil {
			continue
		}
		old, known := s.get(id)
		if known && old.ConfigVersion > status.ConfigVersion {
			continue // never backwards (the live version only grows)
		}
		m := recordOf(id, &cfg, status.ConfigVersion, status.WantLoaded)
		if known && old.equal(&m) || containsID(c.Models, id) {
			continue
		}
		c.Models = append(c.Models, m)
		if in, ok := s.intents[id]; ok && in.ConfigVersion <= m.ConfigVersion && g.applying[id] == 0 {
			c.Settled = append(c.Settled, id)
		}
	}
	return c
}

func containsID(ms []Model, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

func recordOf(id string, c *core.Config, version uint64, loaded bool) Model {
	return Model{ID: id, ConfigVersion: version, Loaded: loaded, Task: c.Task, Engine: c.Engine,
		Checkpoint: c.Checkpoint, Options: json.RawMessage(c.Options), Slots: c.Slots,
		AdmissionTimeoutNS: c.AdmissionTimeout, MaxQueue: c.MaxQueue, Aliases: runtime.SpecOf(c).Aliases, VoiceMap: runtime.VoiceMapOf(c)}
}

// runtimeSpec is the spec that registers the model again, unloaded, at its
// recorded config_version.
func (m *Model) runtimeSpec() runtime.ModelSpec {
	spec := runtime.SpecOf(&core.Config{Engine: m.Engine, Checkpoint: m.Checkpoint, Task: m.Task, Slots: m.Slots,
		Options: string(m.Options), AdmissionTimeout: m.AdmissionTimeoutNS, MaxQueue: m.MaxQueue,
		Aliases: strings.Join(m.Aliases, ",")})
	spec.VoiceMap = m.VoiceMap
	spec.BaseVersion, spec.RegisterOnly = m.ConfigVersion, true
	return spec
}

// Restore registers every recorded model, unloaded, at its recorded
// config_version (CONTRACT.md persist.restore), and restores the
// tombstones of unregistered ones (unreg.persisted), in registration
// order; it returns the records it restored. A model that no longer
// validates (its engine not served, its checkpoint gone) is an error
// naming the state file.
func (g *Registry) Restore(ctx context.Context) ([]Model, error) {
	if g.store == nil {
		return nil, nil
	}
	st := g.store.State()
	file := g.store.path(snapshotName)
	for _, m := range st.Models {
		if m.Unregistered {
			if err := g.rt.RestoreUnregistered(ctx, m.ID, m.ConfigVersion); err != nil {
				return nil, fmt.Errorf("state file %s: restoring the tombstone of model %q: %w", file, m.ID, err)
			}
			continue
		}
		if _, err := g.rt.Apply(ctx, m.ID, m.runtimeSpec()); err != nil {
			return nil, fmt.Errorf("state file %s: restoring model %q: %w", file, m.ID, err)
		}
	}
	return st.Models, nil
}
