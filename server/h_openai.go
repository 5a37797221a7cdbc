package server

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/edge"
)

// The OpenAI audio routes beside speech and transcriptions (CONTRACT.md
// openai.*): the voices of the speech models, and translations (whisper's
// translate task).

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
}

// handleVoices answers GET /v1/audio/voices: for every speech (tts) model
// in registration order, or the one ?model= names, the voices its engine
// lists (backends.VoiceLister) from its files, never loading it; an engine
// that lists none shows the checkpoint's default voice. Any other query
// parameter is a 400 naming it.
func (s *Server) handleVoices(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "model" {
			if len(k) > maxParamName {
				k = k[:maxParamName] + "..."
			}
			return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_parameter", Param: k,
				Message: fmt.Sprintf("unknown query parameter %q (GET /v1/audio/voices takes model)", k)}
		}
	}
	var ids []string
	if q.Has("model") {
		id := q.Get("model")
		if len(q["model"]) != 1 {
			return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "model", Message: "model given more than once"}
		}
		if err := validModelID(id); err != nil {
			return err
		}
		st, err := s.rt.StatusOf(id)
		if err != nil {
			return fromRuntime(err)
		}
		if st.Task != "tts" {
			return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task", Param: "model",
				Message: fmt.Sprintf("model %q is a %s model, not a speech (tts) model", id, taskName(st.Task))}
		}
		ids = []string{id}
	} else {
		for _, st := range s.rt.Status() {
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
			return FromCode(core.CodeCancelled, "the client went away", err)
		}
		cfg, st, err := s.rt.ConfigOf(id)
		if err != nil {
			continue // the model went away since the snapshot: nothing to list
		}
		mv, err := s.voicesOf(id, st.ConfigVersion, &cfg)
		if err != nil {
			return err
		}
		list.Data = append(list.Data, mv)
	}
	return writeJSON(w, list)
}

// voicesOf lists model id's voices from its committed config.
func (s *Server) voicesOf(id string, version uint64, c *core.Config) (ModelVoices, error) {
	mv := ModelVoices{Model: id, Engine: c.Engine}
	spec := backends.Spec{Model: id, Version: version, Task: c.Task, Engine: c.Engine, Checkpoint: c.Checkpoint,
		Options: []byte(c.Options), Slots: c.Slots}
	var voices []backends.Voice
	if vl, ok := s.roots.engines[c.Engine].(backends.VoiceLister); ok {
		v, err := vl.Voices(spec)
		if err != nil {
			// The config validated when it was committed; its files changed
			// since. Say so for this model rather than failing the list.
			return mv, &Error{Status: http.StatusInternalServerError, Type: "internal_error",
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

// handleTranslation answers POST /v1/audio/translations: an upload as
// transcriptions take, translated into English by the model's engine
// (whisper's translate task: a multilingual whisper checkpoint), answered
// in every response_format transcriptions have. The fields are OpenAI's
// (audio.ParseTranslation: model, response_format, prompt, temperature;
// any other is 400 naming it, before a lease is taken). A model that
// cannot translate (an English-only whisper model, or an engine that only
// transcribes) is a 400 from its engine naming why. When no whisper model
// is registered at all, nothing can translate: a well-formed request is a
// 400 unsupported_task decided from its headers alone, the body never
// read (openai.translations), any other Content-Type 415.
func (s *Server) handleTranslation(w http.ResponseWriter, r *http.Request) error {
	if !s.anyEngine("whisper") {
		return refuseTranslation(w, r)
	}
	return s.transcribe(w, r, audio.ParseTranslation)
}

// anyEngine reports whether a registered model runs engine.
func (s *Server) anyEngine(engine string) bool {
	for _, st := range s.rt.Status() {
		if st.Engine == engine {
			return true
		}
	}
	return false
}

// refuseTranslation answers a translation no served model can do.
func refuseTranslation(w http.ResponseWriter, r *http.Request) error {
	if r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(edge.RefuseDrain))
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	ok := err == nil && (mt == "multipart/form-data" && params["boundary"] != "" ||
		strings.HasPrefix(mt, "audio/") || mt == "application/octet-stream")
	if !ok {
		return &Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
			Message: "POST /v1/audio/translations takes multipart/form-data (file, model, ...) like /v1/audio/transcriptions"}
	}
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_task", Param: "model",
		Message: "no served model translates speech: only a multilingual whisper model translates, and none is registered (POST /v1/audio/transcriptions transcribes)"}
}
