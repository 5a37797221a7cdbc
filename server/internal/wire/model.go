// Package wire holds the wire shapes of the /v1 model routes (the model
// object and its list, the management and inference answers and request
// bodies) and the registration times the model object carries. The
// protocol adapters keep their own shapes (server/internal/openai,
// server/internal/oip).
package wire

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// OwnedBy is the owned_by of every model object: the models are this
// server's, whatever engine runs them (the engine has its own field).
const OwnedBy = "sluice"

// Model is the model object of GET /v1/models, GET /v1/models/{id}, PUT
// and load answers (CONTRACT.md, "Endpoints named in the cells").
type Model struct {
	ID     string `json:"id"`
	Object string `json:"object"` // always "model"
	// Created is OpenAI's created: the Unix second this process registered
	// the model (a restored model: when this process restored it, see
	// Created); the events stream's status objects carry it too.
	Created        int64  `json:"created,omitempty"`
	OwnedBy        string `json:"owned_by"` // always OwnedBy
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
	// Aliases are the model's other names (its committed spec's aliases,
	// sorted): requests may name the model by any of them (CONTRACT.md
	// names.alias-resolve). Always a list.
	Aliases []string `json:"aliases"`
	// AliasOf is set on the entries GET /v1/models adds for aliases: one
	// per alias, after the models, with the alias as id and the model
	// it names here, the rest of the object being that model's. So an
	// OpenAI client's models.list() shows every name it may send; a
	// client that counts models skips the entries that have alias_of.
	AliasOf string `json:"alias_of,omitempty"`
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // always "list"
	Data   []Model `json:"data"`
}

// ModelOf converts a runtime status into the model object, without its
// Created (see Created.Of).
func ModelOf(s core.ModelStatus) Model {
	m := Model{
		ID: s.ID, Object: "model", OwnedBy: OwnedBy, Task: s.Task, Engine: s.Engine, State: s.State.String(), Loaded: s.Loaded,
		Slots: s.Slots, ActiveSlots: s.ActiveSlots, QueuedRequests: s.QueuedRequests,
		QueuedManagers: s.QueuedManagers, ConfigVersion: s.ConfigVersion, LoadFailures: s.LoadFailures,
		BackingOff: s.BackoffUntil != 0, Aliases: []string{},
	}
	if s.Aliases != "" {
		m.Aliases = strings.Split(s.Aliases, ",")
	}
	if s.Loaded && s.MaxParallelSlots > 0 {
		n := s.MaxParallelSlots
		m.MaxParallelSlots = &n
	}
	return m
}

// Created records the Unix second each model was registered in this
// process: noted when an Apply registers a new ID (a reconfigure keeps the
// first time), when the state dir restores one, or when the events stream
// describes the registration, whichever comes first (all within the
// registration). The registry file does not record it, so a restart
// restamps restored models; an unregistered model's time is forgotten, so
// the map holds at most the registered models.
type Created struct {
	mu sync.Mutex
	at map[string]int64
}

// Note records now for id unless id has a time already.
func (c *Created) Note(id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]int64{}
	}
	if _, ok := c.at[id]; !ok {
		c.at[id] = now.Unix()
	}
}

// Forget drops id's time: the model was unregistered, and a later
// registration of the ID is stamped afresh.
func (c *Created) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.at, id)
}

// Of returns id's registration second, noting now for an ID registered
// without Note (none is today; the answer must never lack created).
func (c *Created) Of(id string) int64 {
	c.mu.Lock()
	t, ok := c.at[id]
	c.mu.Unlock()
	if !ok {
		c.Note(id, time.Now())
		return c.Of(id)
	}
	return t
}

// UnloadResult is the answer of POST /v1/models/{id}/unload.
type UnloadResult struct {
	ID     string `json:"id"`
	Loaded bool   `json:"loaded"`
}

// DeletedModel is the answer of DELETE /v1/models/{id}, in the shape of
// OpenAI's models.delete.
type DeletedModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Deleted bool   `json:"deleted"`
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

// InferRequest is the body of POST /v1/models/{id}/infer.
type InferRequest struct {
	Input              json.RawMessage `json:"input"`
	Stream             bool            `json:"stream,omitempty"`
	AdmissionTimeoutMS *int64          `json:"admission_timeout_ms,omitempty"`
}

// ParseInfer validates an inference request.
func ParseInfer(req *InferRequest) error {
	if req.Input == nil {
		return httpapi.InvalidParam("input", "input is required")
	}
	if req.AdmissionTimeoutMS != nil && (*req.AdmissionTimeoutMS < 0 || *req.AdmissionTimeoutMS > runtime.MaxTimeoutMS) {
		return httpapi.InvalidParam("admission_timeout_ms", "admission_timeout_ms must be 0..%d", runtime.MaxTimeoutMS)
	}
	return nil
}

// BulkUnloadRequest is the body of POST /v1/models/unload.
type BulkUnloadRequest struct {
	Models []string `json:"models"`
}

// AliasEntry is the list entry of alias a of model m: m's object under
// the alias's name, saying which model it names.
func AliasEntry(m Model, a string) Model {
	m.AliasOf, m.ID, m.Aliases = m.ID, a, []string{}
	return m
}
