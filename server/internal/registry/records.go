package registry

// The records of a state dir: a model's, the whole state's (a snapshot's
// body) and one journal record's (format.go encodes them).

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Model is one model's committed config, its config_version and its
// desired state, as recorded.
type Model struct {
	ID            string          `json:"id"`
	ConfigVersion uint64          `json:"config_version"`
	Loaded        bool            `json:"loaded"` // desired: loaded again at start
	Task          string          `json:"task"`
	Engine        string          `json:"engine"`
	Checkpoint    string          `json:"checkpoint"` // as resolved at commit (absolute under a models root)
	Options       json.RawMessage `json:"options"`
	Slots         int             `json:"slots"`
	// AdmissionTimeoutNS is core.Config.AdmissionTimeout: -1 the server
	// default, 0 unbounded.
	AdmissionTimeoutNS int64 `json:"admission_timeout_ns"`
	MaxQueue           int   `json:"max_queue"`
	// Unregistered marks the tombstone of a model DELETE /v1/models/{id}
	// removed: ConfigVersion is the last version it had, the config fields
	// are empty, and a start restores it as a tombstone (never loaded,
	// never listed), so that a registration of the ID starts past that
	// version (CONTRACT.md unreg.persisted).
	Unregistered bool `json:"unregistered,omitempty"`
	// Aliases are core.Config.Aliases as a list (absent: none, as in the
	// files of builds before aliases, which stay readable).
	Aliases []string `json:"aliases,omitempty"`
	// VoiceMap is core.Config.VoiceMap as a map (absent: none, as in the
	// files of builds before voice maps, which stay readable).
	VoiceMap map[string]string `json:"voice_map,omitempty"`
}

func (m *Model) equal(o *Model) bool {
	return m.ID == o.ID && m.ConfigVersion == o.ConfigVersion && m.Loaded == o.Loaded && m.Task == o.Task &&
		m.Engine == o.Engine && m.Checkpoint == o.Checkpoint && bytes.Equal(m.Options, o.Options) &&
		m.Slots == o.Slots && m.AdmissionTimeoutNS == o.AdmissionTimeoutNS && m.MaxQueue == o.MaxQueue &&
		m.Unregistered == o.Unregistered && slices.Equal(m.Aliases, o.Aliases) && maps.Equal(m.VoiceMap, o.VoiceMap)
}

// State is the recorded state: the body of a snapshot.
type State struct {
	ModelsRoot string  `json:"models_root,omitempty"` // "" until PUT /v1/settings/models-root
	Journal    uint64  `json:"journal,omitempty"`     // the generation of the journal that continues it
	Models     []Model `json:"models"`                // in registration order
	// Intents are the announced reconfigurations not yet settled: each
	// the record a PUT will leave at the config_version it will commit,
	// written before the runtime commits it (Registry.Apply), so that a
	// version the runtime showed is never given to another config
	// (CONTRACT.md persist.version-continues). A start rolls one forward
	// over an older record of its ID. Written only while one is pending.
	Intents []Model `json:"intents,omitempty"`
}

// Get returns id's record.
func (st State) Get(id string) (Model, bool) {
	for _, m := range st.Models {
		if m.ID == id {
			return m, true
		}
	}
	return Model{}, false
}

// change is one journal record: models' new records and a new root, and
// the intents it announces (Intents) or settles (Settled: their IDs).
type change struct {
	ModelsRoot *string  `json:"models_root,omitempty"`
	Models     []Model  `json:"models,omitempty"`
	Settled    []string `json:"settled,omitempty"`
	Intents    []Model  `json:"intents,omitempty"`
}
