package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Diarization serves POST /v1/audio/diarization (speaches' route and
// shape): an audio upload with the fields DiarizationFields
// (num_speakers, or min_speakers and max_speakers, each 1..32;
// response_format json or rttm). Every field is checked before a lease is
// taken: an unknown, repeated or nonsense one is 400 naming it
// (diar.fields). The answer is {"duration","segments":[{"start","end",
// "speaker"}]} or, with rttm, text/plain RTTM SPEAKER lines named after
// the upload's file name.
func (h *Handlers) Diarization(w http.ResponseWriter, r *http.Request) error {
	u, err := h.audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	p, in, err := ParseDiarization(u.fields, u.input)
	if err != nil {
		return httpapi.InvalidRequest(err)
	}
	var res audio.DiarizationResult
	lease, out, err := h.inferUpload(r, u, p.Model, "diarization", in, &res)
	if err != nil {
		return err
	}
	defer lease.Release(true)
	if p.ResponseFormat == "rttm" {
		return h.d.WriteTask(w, r, lease, "text/plain; charset=utf-8", []byte(RTTM(res, rttmName(u.filename))))
	}
	return h.d.WriteTask(w, r, lease, jsonType, append(out.JSON, '\n'))
}

var rttmUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// rttmName is an RTTM file ID from an upload's file name: its base without
// the extension, unsafe characters as "_", at most 64 bytes; "audio" when
// there is none.
func rttmName(filename string) string {
	base := filename
	for i := len(base) - 1; i >= 0; i-- {
		if base[i] == '/' || base[i] == '\\' {
			base = base[i+1:]
			break
		}
	}
	for i := len(base) - 1; i > 0; i-- {
		if base[i] == '.' {
			base = base[:i]
			break
		}
	}
	base = rttmUnsafe.ReplaceAllString(base, "_")
	if len(base) > 64 {
		base = base[:64]
	}
	if base == "" || base == "_" {
		return "audio"
	}
	return base
}

// speakerEmbedding is the answer of POST /v1/audio/speech/embedding.
type speakerEmbedding struct {
	Model     string    `json:"model"`
	Duration  float64   `json:"duration"`
	Dim       int       `json:"dim"`
	Embedding []float32 `json:"embedding"`
}

// SpeakerEmbedding serves POST /v1/audio/speech/embedding (the route
// speaches serves): an audio upload (as for diarization) with the field
// model, naming a diarization model whose engine extracts speaker
// embeddings (engine sherpa: its checkpoint's embedding extractor, at
// most 30 s of audio). The answer is the L2-normalised embedding of the
// whole audio, {"model","duration","dim","embedding":[...]}: compare two
// with their dot product. Any other field is a 400 naming it; a model
// whose engine has no extractor refuses the request (its strict input
// decoding names the field embedding).
func (h *Handlers) SpeakerEmbedding(w http.ResponseWriter, r *http.Request) error {
	u, err := h.audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	for name, vs := range u.fields {
		if name != "model" {
			return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_parameter", Param: name,
				Message: fmt.Sprintf("field %.64q is not supported (accepted: model)", name)}
		}
		if len(vs) > 1 {
			return httpapi.InvalidParam("model", "field model is given %d times", len(vs))
		}
	}
	in := map[string]any{"embedding": true}
	if len(u.input) > 0 {
		var decl audio.DiarizationRequest // a declared audio/L16 rate
		if err := json.Unmarshal(u.input, &decl); err == nil && decl.SampleRate > 0 {
			in["sample_rate"] = decl.SampleRate
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("openai: embedding input: %w", err)
	}
	var res speakerEmbedding
	lease, _, err := h.inferUpload(r, u, u.model, "diarization", b, &res)
	if err != nil {
		return err
	}
	defer lease.Release(true)
	res.Model = u.model
	out, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("openai: embedding answer: %w", err)
	}
	return h.d.WriteTask(w, r, lease, jsonType, append(out, '\n'))
}
