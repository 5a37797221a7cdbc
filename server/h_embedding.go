package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluice-dev/sluice/backends/audio"
)

// speakerEmbedding is the answer of POST /v1/audio/speech/embedding.
type speakerEmbedding struct {
	Model     string    `json:"model"`
	Duration  float64   `json:"duration"`
	Dim       int       `json:"dim"`
	Embedding []float32 `json:"embedding"`
}

// handleSpeakerEmbedding serves POST /v1/audio/speech/embedding (the route
// speaches serves): an audio upload (as for diarization) with the field
// model, naming a diarization model whose engine extracts speaker
// embeddings (engine sherpa: its checkpoint's embedding extractor, at
// most 30 s of audio). The answer is the L2-normalised embedding of the
// whole audio, {"model","duration","dim","embedding":[...]}: compare two
// with their dot product. Any other field is a 400 naming it; a model
// whose engine has no extractor refuses the request (its strict input
// decoding names the field embedding).
func (s *Server) handleSpeakerEmbedding(w http.ResponseWriter, r *http.Request) error {
	u, err := audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	for name, vs := range u.fields {
		if name != "model" {
			return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_parameter", Param: name,
				Message: fmt.Sprintf("field %.64q is not supported (accepted: model)", name)}
		}
		if len(vs) > 1 {
			return InvalidParam("model", "field model is given %d times", len(vs))
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
		return err
	}
	var res speakerEmbedding
	lease, _, err := s.inferUpload(r, u, u.model, "diarization", b, &res)
	if err != nil {
		return err
	}
	defer lease.Release(true)
	res.Model = u.model
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return writeTask(w, r, lease, jsonContentType[0], append(out, '\n'))
}
