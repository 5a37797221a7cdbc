package core

// ModelStatus is what GET /v1/models reports for one model.
type ModelStatus struct {
	ID     string
	Task   string
	Engine string
	State  State
	// Loaded is true while a complete pool is published; it turns false the
	// moment an unload, eviction or reconfigure retires the pool logically,
	// before the teardown finishes.
	Loaded         bool
	Slots          int
	ActiveSlots    int
	QueuedRequests int
	QueuedManagers int
	// MaxParallelSlots is the advertised capacity of the live pool, 0 (null
	// over HTTP) until loaded and after retirement.
	MaxParallelSlots int
	ConfigVersion    uint64
	MemoryMB         int64
	ResidentMB       int64
	// LoadFailures counts failed loads since the last successful load or
	// granted manager; BackoffUntil is when the backoff after the last one
	// ends (machine time, 0 for none; CONTRACT.md fail.load-backoff).
	LoadFailures int
	BackoffUntil int64
	// WantLoaded is the desired state the last successful manager left
	// (loaded after a register, reconfigure or load; unloaded after an
	// unload or bulk member), whatever evictions did since: what a restart
	// restores (CONTRACT.md persist.restore).
	WantLoaded bool
	// Unregistered marks the tombstone of an unregistered model: it holds
	// nothing and is listed nowhere; only its ID and ConfigVersion (the
	// last one it had) still mean something (CONTRACT.md unreg.tombstone).
	Unregistered bool
	// Aliases are the committed config's other names of the model
	// (Config.Aliases), in the same snapshot as the rest.
	Aliases string
}

// Status returns the status of one model.
func (m *Machine) Status(h Handle) ModelStatus {
	md := &m.models[h]
	return ModelStatus{
		ID: md.id, Task: md.cfg.Task, Engine: md.cfg.Engine, State: md.state, Loaded: md.published,
		Slots: md.cfg.Slots, ActiveSlots: md.active, QueuedRequests: md.nReq, QueuedManagers: md.nMgr,
		MaxParallelSlots: md.capacity * b2i(md.published), ConfigVersion: md.version,
		MemoryMB: md.cfg.MemoryMB, ResidentMB: md.resMB, LoadFailures: md.loadFails, BackoffUntil: md.backoffUntil,
		WantLoaded: md.wantLoaded, Unregistered: md.gone, Aliases: md.cfg.Aliases,
	}
}

// Snapshot returns the status of every registered model in registration
// order (tombstones are left out). The
// shell calls it under the same lock as every event, so it is one atomic
// snapshot across all models: no model is ever seen half-changed.
func (m *Machine) Snapshot() []ModelStatus {
	out := make([]ModelStatus, 0, len(m.models))
	for h := range m.models {
		if !m.models[h].gone {
			out = append(out, m.Status(Handle(h)))
		}
	}
	return out
}

// Residency reports the ledger: resident models and their charged memory.
func (m *Machine) Residency() (models int, memoryMB int64) { return m.resCount, m.resMB }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
