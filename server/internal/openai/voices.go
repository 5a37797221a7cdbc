package openai

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Bounds of GET /v1/audio/voices: voices listed per model (espeak-ng's data
// has about a hundred; a checkpoint with more is cut, and says so) and
// speech models listed in one answer.
const (
	maxVoicesPerModel = 256
	maxVoiceModels    = 1024
	maxParamName      = 64 // of an unknown parameter echoed in an error
)

// VoiceList is the answer of GET /v1/audio/voices.
type VoiceList struct {
	Object string        `json:"object"` // always "list"
	Data   []ModelVoices `json:"data"`
	// Truncated says more speech models are registered than one answer
	// lists (maxVoiceModels); ask for them one by one with ?model=.
	Truncated bool `json:"truncated"`
}

// ModelVoices are the voices of one speech model.
type ModelVoices struct {
	Model  string           `json:"model"`
	Engine string           `json:"engine"`
	Voices []backends.Voice `json:"voices"`
	// Truncated says the engine lists more than maxVoicesPerModel voices.
	Truncated bool `json:"truncated"`
	// VoiceMap is the voice each of OpenAI's stock names gets on this
	// model: the model's voice_map where it maps the name, else its
	// default voice (CONTRACT.md names.voice-map).
	VoiceMap map[string]string `json:"voice_map"`
}

// Voices answers GET /v1/audio/voices: for every speech (tts) model in
// registration order, or the one ?model= names, the voices its engine
// lists (backends.VoiceLister) from its files, never loading it; an engine
// that lists none shows the checkpoint's default voice. Any other query
// parameter is a 400 naming it.
func (h *Handlers) Voices(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "model" {
			if len(k) > maxParamName {
				k = k[:maxParamName] + "..."
			}
			return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_parameter", Param: k,
				Message: fmt.Sprintf("unknown query parameter %q (GET /v1/audio/voices takes model)", k)}
		}
	}
	var ids []string
	if q.Has("model") {
		id := q.Get("model")
		if len(q["model"]) != 1 {
			return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "model", Message: "model given more than once"}
		}
		if err := h.d.ValidModelID(id); err != nil {
			return err
		}
		if canon, ok := h.d.Runtime.Resolve(id); ok {
			id = canon // an alias lists its model's voices
		}
		st, err := h.d.Runtime.StatusOf(id)
		if err != nil {
			return httpapi.FromRuntimeModel(err)
		}
		if st.Task != "tts" {
			return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task", Param: "model",
				Message: fmt.Sprintf("model %q is a %s model, not a speech (tts) model", id, taskName(st.Task))}
		}
		ids = []string{id}
	} else {
		for _, st := range h.d.Runtime.Status() {
			if st.Task == "tts" {
				ids = append(ids, st.ID)
			}
		}
	}
	list := VoiceList{Object: "list", Data: []ModelVoices{}}
	if len(ids) > maxVoiceModels {
		ids, list.Truncated = ids[:maxVoiceModels], true
	}
	for _, id := range ids {
		if err := r.Context().Err(); err != nil {
			return &httpapi.Error{Status: 499, Type: "cancelled", Code: core.CodeCancelled.String(), Message: "the client went away", Err: err}
		}
		cfg, st, err := h.d.Runtime.ConfigOf(id)
		if err != nil {
			continue // the model went away since the snapshot: nothing to list
		}
		mv, err := h.voicesOf(id, st.ConfigVersion, &cfg)
		if err != nil {
			return err
		}
		list.Data = append(list.Data, mv)
	}
	return writeJSON(w, list)
}

// voicesOf lists model id's voices from its committed config.
func (h *Handlers) voicesOf(id string, version uint64, c *core.Config) (ModelVoices, error) {
	mv := ModelVoices{Model: id, Engine: c.Engine}
	spec := backends.Spec{Model: id, Version: version, Task: c.Task, Engine: c.Engine, Checkpoint: c.Checkpoint,
		Options: []byte(c.Options), Slots: c.Slots}
	var voices []backends.Voice
	if vl, ok := h.d.Engines[c.Engine].(backends.VoiceLister); ok {
		v, err := vl.Voices(spec)
		if err != nil {
			// The config validated when it was committed; its files changed
			// since. Say so for this model rather than failing the list.
			return mv, &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error",
				Message: fmt.Sprintf("model %q: its engine cannot list its voices now", id), Err: err}
		}
		voices = v
	}
	if len(voices) == 0 {
		voices = []backends.Voice{defaultVoice(c.Checkpoint)}
	}
	if len(voices) > maxVoicesPerModel {
		voices, mv.Truncated = voices[:maxVoicesPerModel], true
	}
	for i := range voices {
		if voices[i].Languages == nil {
			voices[i].Languages = []string{}
		}
	}
	mv.Voices = voices
	def := voices[0].ID // an engine that flags no default: its first
	for _, v := range voices {
		if v.Default {
			def = v.ID
			break
		}
	}
	mapped := runtime.VoiceMapOf(c)
	mv.VoiceMap = make(map[string]string, len(backends.StockVoices))
	for _, s := range backends.StockVoices {
		mv.VoiceMap[s] = def
		if v, ok := mapped[s]; ok {
			mv.VoiceMap[s] = v
		}
	}
	return mv, nil
}

// defaultVoice is the voice of a model whose engine lists none: the
// checkpoint manifest's options.voice when it is a catalogue folder that
// names one, else "default" (what requests may always send).
func defaultVoice(checkpoint string) backends.Voice {
	v := backends.Voice{ID: "default", Languages: []string{}, Default: true}
	if cp, err := catalogue.Load(checkpoint); err == nil {
		var o struct {
			Voice string `json:"voice"`
		}
		if json.Unmarshal(cp.Options, &o) == nil && o.Voice != "" && len(o.Voice) <= 256 {
			v.ID = o.Voice
		}
	}
	return v
}

// taskName names a task for messages ("" is the fixture's task-less model).
func taskName(t string) string {
	if t == "" {
		return "task-less"
	}
	return t
}
