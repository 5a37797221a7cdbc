package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The OpenAI-compatible task endpoints. They go through the same scheduler
// as /v1/models/{id}/infer: one lease per request, held until the answer is
// flushed; backends/audio maps their bodies onto engine requests.

// taskLease acquires a lease on model id with the header's admission
// timeout (these bodies have no admission_timeout_ms field). The model's
// registered task must be task: another is 400 invalid_request_error
// wrong_task before any lease is taken (CONTRACT.md err.wrong-task), not
// an engine asked for what it cannot produce.
func (s *Server) taskLease(r *http.Request, id, task string) (*runtime.Lease, error) {
	if err := validModelID(id); err != nil {
		return nil, err
	}
	st, err := s.rt.StatusOf(id)
	if err != nil {
		return nil, fromRuntime(err)
	}
	if st.Task != task {
		got := "no task"
		if st.Task != "" {
			got = fmt.Sprintf("task %q", st.Task)
		}
		return nil, &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task",
			Message: fmt.Sprintf("model %q serves %s; %s needs a %s model", id, got, r.URL.Path, task)}
	}
	timeout, err := admissionTimeout(r, nil)
	if err != nil {
		return nil, err
	}
	lease, err := s.rt.Acquire(r.Context(), id, timeout)
	if err != nil {
		return nil, fromRuntime(err)
	}
	return lease, nil
}

// writeTask writes a finished task answer and releases the lease once the
// bytes are flushed (or the write failed).
func writeTask(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, contentType string, body []byte) error {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, werr := w.Write(body)
	if werr == nil {
		werr = http.NewResponseController(w).Flush()
	}
	lease.Release(werr != nil)
	if werr != nil {
		logger(r.Context()).Debug("answer not delivered", "err", werr)
	}
	return nil
}

// handleSpeech serves POST /v1/audio/speech: JSON {model, input, voice,
// response_format wav|pcm, speed, stream_format}; the answer is the audio
// (or, with stream_format, server-sent chunks).
func (s *Server) handleSpeech(w http.ResponseWriter, r *http.Request) error {
	var p audio.SpeechParams
	if err := decodeStrict(r, &p); err != nil {
		return err
	}
	req, err := p.Request()
	if err != nil {
		return Invalid("%v", err)
	}
	lease, err := s.taskLease(r, p.Model, "tts")
	if err != nil {
		return err
	}
	defer lease.Release(true) // a no-op once released
	req.ID = requestIDFrom(r.Context())
	if req.Stream {
		return s.stream(w, r, lease, req)
	}
	out, err := lease.Infer(r.Context(), req, nil)
	if err != nil {
		return fromRuntime(err)
	}
	if len(out.Data) == 0 {
		return &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "the engine produced no audio",
			Err: fmt.Errorf("model %q is not a speech model", p.Model)}
	}
	return writeTask(w, r, lease, out.ContentType, out.Data)
}

// audioUpload reads an uploaded audio request: multipart/form-data with
// file, model and response_format fields, or a raw audio/wav body with
// ?model= (and ?response_format=).
func audioUpload(r *http.Request) (model, format string, data []byte, err error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		data, err = io.ReadAll(r.Body)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return "", "", nil, &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
					Code: "body_too_large", Message: fmt.Sprintf("request body over %d bytes", tooBig.Limit)}
			}
			return "", "", nil, Invalid("reading the audio: %v", err)
		}
		q := r.URL.Query()
		return q.Get("model"), q.Get("response_format"), data, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return "", "", nil, Invalid("multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", "", nil, Invalid("multipart body: %v", err)
		}
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, part); err != nil {
			return "", "", nil, Invalid("multipart body: %v", err)
		}
		switch part.FormName() {
		case "file":
			data = buf.Bytes()
		case "model":
			model = buf.String()
		case "response_format":
			format = buf.String()
		}
	}
	if data == nil {
		return "", "", nil, Invalid("multipart body has no file")
	}
	return model, format, data, nil
}

// handleTranscription serves POST /v1/audio/transcriptions: a WAV file (any
// rate; resampled by the engine) answered as json, text or verbose_json.
func (s *Server) handleTranscription(w http.ResponseWriter, r *http.Request) error {
	model, format, data, err := audioUpload(r)
	if err != nil {
		return err
	}
	switch format {
	case "", "json", "text", "verbose_json":
	default:
		return Invalid("response_format %q is not supported (json, text or verbose_json)", format)
	}
	lease, err := s.taskLease(r, model, "asr")
	if err != nil {
		return err
	}
	defer lease.Release(true)
	out, err := lease.Infer(r.Context(), backends.Request{ID: requestIDFrom(r.Context()), Data: data}, nil)
	if err != nil {
		return fromRuntime(err)
	}
	ct, body, err := audio.TranscriptionBody(out, format)
	if err != nil {
		return &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a transcription model", Err: err}
	}
	return writeTask(w, r, lease, ct, body)
}

// handleVoiceActivity serves POST /v1/audio/voice-activity: a WAV file;
// the answer is {"segments":[{"start","end"}],"duration"} in seconds.
func (s *Server) handleVoiceActivity(w http.ResponseWriter, r *http.Request) error {
	model, _, data, err := audioUpload(r)
	if err != nil {
		return err
	}
	lease, err := s.taskLease(r, model, "vad")
	if err != nil {
		return err
	}
	defer lease.Release(true)
	out, err := lease.Infer(r.Context(), backends.Request{ID: requestIDFrom(r.Context()), Data: data}, nil)
	if err != nil {
		return fromRuntime(err)
	}
	var v audio.VADResult
	if err := json.Unmarshal(out.JSON, &v); err != nil {
		return &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a voice-activity model", Err: err}
	}
	return writeTask(w, r, lease, jsonContentType[0], append(out.JSON, '\n'))
}
