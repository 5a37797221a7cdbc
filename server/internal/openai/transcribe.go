package openai

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Transcription serves POST /v1/audio/transcriptions: an audio upload
// answered as json, text, verbose_json (segments, and words with
// timestamp_granularities[]=word), srt or vtt, or with stream=true as
// server-sent transcript.text.delta and transcript.text.done events. Every
// field is checked before a lease is taken (ParseTranscription): an
// unknown or unusable one is 400 naming it; language is checked by the
// engine against the model's.
func (h *Handlers) Transcription(w http.ResponseWriter, r *http.Request) error {
	return h.transcribe(w, r, ParseTranscription)
}

// Translation answers POST /v1/audio/translations: an upload as
// transcriptions take, translated into English by the model's engine
// (whisper's translate task: a multilingual whisper checkpoint), answered
// in every response_format transcriptions have. The fields are OpenAI's
// (ParseTranslation: model, response_format, prompt, temperature; any
// other is 400 naming it, before a lease is taken). A model that cannot
// translate (an English-only whisper model, or an engine that only
// transcribes) is a 400 from its engine naming why. When no whisper model
// is registered at all, nothing can translate: a well-formed request is a
// 400 unsupported_task decided from its headers alone, the body never
// read (openai.translations), any other Content-Type 415.
func (h *Handlers) Translation(w http.ResponseWriter, r *http.Request) error {
	if !h.anyEngine("whisper") {
		return h.refuseTranslation(w, r)
	}
	return h.transcribe(w, r, ParseTranslation)
}

// anyEngine reports whether a registered model runs engine.
func (h *Handlers) anyEngine(engine string) bool {
	for _, st := range h.d.Runtime.Status() {
		if st.Engine == engine {
			return true
		}
	}
	return false
}

// refuseTranslation answers a translation no served model can do.
func (h *Handlers) refuseTranslation(w http.ResponseWriter, r *http.Request) error {
	if r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.d.RefuseDrain))
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	ok := err == nil && (mt == "multipart/form-data" && params["boundary"] != "" ||
		strings.HasPrefix(mt, "audio/") || mt == "application/octet-stream")
	if !ok {
		return &httpapi.Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
			Message: "POST /v1/audio/translations takes multipart/form-data (file, model, ...) like /v1/audio/transcriptions"}
	}
	return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_task", Param: "model",
		Message: "no served model translates speech: only a multilingual whisper model translates, and none is registered (POST /v1/audio/transcriptions transcribes)"}
}

// transcribe is the path transcriptions and translations share: the
// upload, its fields checked by parse before a lease is taken, the
// engine's answer as the response_format asks (or, with stream=true,
// server-sent events).
func (h *Handlers) transcribe(w http.ResponseWriter, r *http.Request, parse func(map[string][]string) (TranscriptionParams, error)) error {
	u, err := h.audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	p, err := parse(u.fields)
	if err != nil {
		return httpapi.InvalidRequest(err)
	}
	in, err := p.Input(u.input)
	if err != nil {
		return httpapi.InvalidRequest(err)
	}
	lease, err := h.d.Lease(r, p.Model, "asr")
	if err != nil {
		return err
	}
	defer lease.Release(true)
	req := u.request(httpapi.RequestID(r.Context()))
	req.Input = in
	if p.Stream {
		req.Stream = true
		err := h.d.StreamEvents(w, r, lease, req, TranscriptEvents, transcriptDone)
		u.Close()
		return err
	}
	out, err := lease.Infer(r.Context(), req, nil)
	u.Close() // the spool file goes before the answer is written
	if err != nil {
		return httpapi.FromRuntimeModel(err)
	}
	ct, body, err := TranscriptionBody(out, p)
	if err != nil {
		return &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a transcription model", Err: err}
	}
	return h.d.WriteTask(w, r, lease, ct, body)
}

// VoiceActivity serves POST /v1/audio/voice-activity: an audio upload
// with the fields VoiceActivityFields (threshold, min_speech_ms,
// min_silence_ms, speech_pad_ms override the checkpoint's defaults; any
// other field is 400 naming it, before a lease is taken); the answer is
// {"segments":[{"start","end"}],"duration"} in seconds.
func (h *Handlers) VoiceActivity(w http.ResponseWriter, r *http.Request) error {
	u, err := h.audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	model, in, err := ParseVoiceActivity(u.fields, u.input)
	if err != nil {
		return httpapi.InvalidRequest(err)
	}
	var v audio.VADResult
	lease, out, err := h.inferUpload(r, u, model, "vad", in, &v)
	if err != nil {
		return err
	}
	defer lease.Release(true)
	return h.d.WriteTask(w, r, lease, jsonType, append(out.JSON, '\n'))
}

// inferUpload runs the upload u, with the engine input in, on a lease of
// model for task, and decodes the engine's JSON answer into result. The
// spool file is gone when it returns. On success the caller writes its
// answer and then releases the lease.
func (h *Handlers) inferUpload(r *http.Request, u *upload, model, task string, in json.RawMessage, result any) (*runtime.Lease, backends.Output, error) {
	lease, err := h.d.Lease(r, model, task)
	if err != nil {
		return nil, backends.Output{}, err
	}
	req := u.request(httpapi.RequestID(r.Context()))
	req.Input = in
	out, err := lease.Infer(r.Context(), req, nil)
	u.Close() // the spool file goes before the answer is written
	if err == nil {
		if uerr := json.Unmarshal(out.JSON, result); uerr != nil {
			err = &httpapi.Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a " + task + " model", Err: uerr}
		}
	} else {
		err = httpapi.FromRuntimeModel(err)
	}
	if err != nil {
		lease.Release(true)
		return nil, backends.Output{}, err
	}
	return lease, out, nil
}
