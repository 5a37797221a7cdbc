package server

import (
	"encoding/json"

	"github.com/sluice-dev/sluice/core"
)

// Model is the model object of GET /v1/models, GET /v1/models/{id}, PUT
// and load answers (issue 5; CONTRACT.md, "Endpoints named in the cells").
type Model struct {
	ID             string `json:"id"`
	Object         string `json:"object"` // always "model"
	Task           string `json:"task"`
	Engine         string `json:"engine"`
	State          string `json:"state"` // unloaded, loading, ready, reconfiguring, unloading
	Loaded         bool   `json:"loaded"`
	Slots          int    `json:"slots"`
	ActiveSlots    int    `json:"active_slots"`
	QueuedRequests int    `json:"queued_requests"`
	QueuedManagers int    `json:"queued_managers"`
	// MaxParallelSlots is the advertised capacity of the published pool;
	// null before the first load and after retirement (CONTRACT.md
	// mode.slot-capacity).
	MaxParallelSlots *int   `json:"max_parallel_slots"`
	ConfigVersion    uint64 `json:"config_version"`
	// LoadFailures counts the failed loads since the last successful one or
	// the last granted manager; BackingOff says a request that would load
	// the model is refused now, with the remaining time as its Retry-After
	// (CONTRACT.md fail.load-backoff). Both change only with scheduler
	// events, so the events stream carries them exactly.
	LoadFailures int  `json:"load_failures"`
	BackingOff   bool `json:"backing_off"`
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // always "list"
	Data   []Model `json:"data"`
}

// modelOf converts a runtime status into the model object.
func modelOf(s core.ModelStatus) Model {
	m := Model{
		ID: s.ID, Object: "model", Task: s.Task, Engine: s.Engine, State: s.State.String(), Loaded: s.Loaded,
		Slots: s.Slots, ActiveSlots: s.ActiveSlots, QueuedRequests: s.QueuedRequests,
		QueuedManagers: s.QueuedManagers, ConfigVersion: s.ConfigVersion, LoadFailures: s.LoadFailures,
		BackingOff: s.BackoffUntil != 0,
	}
	if s.Loaded && s.MaxParallelSlots > 0 {
		n := s.MaxParallelSlots
		m.MaxParallelSlots = &n
	}
	return m
}

// UnloadResult is the answer of POST /v1/models/{id}/unload.
type UnloadResult struct {
	ID     string `json:"id"`
	Loaded bool   `json:"loaded"`
}

// BulkUnloadResult is the answer of POST /v1/models/unload.
type BulkUnloadResult struct {
	Unloaded []string `json:"unloaded"`
	NotFound []string `json:"not_found"`
}

// InferResult is the answer of a non-streamed POST /v1/models/{id}/infer.
type InferResult struct {
	ID            string          `json:"id"`     // the request ID (X-Request-Id)
	Output        json.RawMessage `json:"output"` // null when the engine returned no JSON
	ConfigVersion uint64          `json:"config_version"`
	Slot          int             `json:"slot"`
	// ContentType and Data carry a binary result (for example audio) when
	// the engine returned one; Data is base64 in JSON.
	ContentType string `json:"content_type,omitempty"`
	Data        []byte `json:"data,omitempty"`
}
