package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
// task must be task: another is 400 invalid_request_error wrong_task,
// decided by the runtime where admission is decided: before the request
// queues or holds a slot, and again on the lease's own snapshot, the
// config its pool was built from, so a concurrent PUT that changes the
// task never hands this request a lease of the other task (CONTRACT.md
// err.wrong-task), and an engine is never asked for what it cannot
// produce.
func (s *Server) taskLease(r *http.Request, id, task string) (*runtime.Lease, error) {
	if err := validModelID(id); err != nil {
		return nil, err
	}
	timeout, err := admissionTimeout(r, nil)
	if err != nil {
		return nil, err
	}
	lease, err := s.rt.AcquireTask(r.Context(), id, task, timeout)
	var te *runtime.TaskError
	if errors.As(err, &te) {
		got := "no task"
		if te.Have != "" {
			got = fmt.Sprintf("task %q", te.Have)
		}
		return nil, &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task", Param: "model",
			Message: fmt.Sprintf("model %q serves %s; %s needs a %s model", id, got, r.URL.Path, task), Err: err}
	}
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
// instructions (empty only), response_format wav|mp3|opus|flac|pcm, speed,
// stream_format, sample_rate}; a field it cannot honour is 400 naming it
// (audio.SpeechParams.Request, before a lease; the engine checks the
// voice, naming the model's); the answer
// is the audio with the engine's content type (audio/wav, audio/mpeg,
// audio/ogg; codecs=opus, audio/flac, or audio/pcm; rate=24000 unless
// sample_rate) or, with stream_format, streamed (streamSpeech).
func (s *Server) handleSpeech(w http.ResponseWriter, r *http.Request) error {
	var p audio.SpeechParams
	if err := decodeStrict(r, &p); err != nil {
		return err
	}
	req, err := p.Request()
	if err != nil {
		return invalidRequest(err)
	}
	lease, err := s.taskLease(r, p.Model, "tts")
	if err != nil {
		return err
	}
	defer lease.Release(true) // a no-op once released
	req.ID = requestIDFrom(r.Context())
	if req.Stream {
		return s.streamSpeech(w, r, lease, req, p)
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

// upload is an uploaded audio request: its fields and its payload, in
// memory or spooled to a temporary file (CONTRACT.md edge.upload-spool).
type upload struct {
	model, format string
	filename      string              // the multipart file part's name ("" for a raw body)
	fields        map[string][]string // every field but file (multipart) or query parameter, as sent
	payload       *spooled
	input         json.RawMessage // {"sample_rate":N} for a declared audio/L16 payload
}

// maxFormFields bounds the fields of one upload (besides the file).
const maxFormFields = 32

// request is the engine request of the upload: the payload as Body (a
// backends.Blob, valid until the handler returns), and also as Data when
// it is in memory anyway.
func (u *upload) request(id string) backends.Request {
	return backends.Request{ID: id, Input: u.input, Data: u.payload.data, Body: u.payload.blob()}
}

// Close removes the spool file, if any.
func (u *upload) Close() {
	if err := u.payload.Close(); err != nil {
		slog.Default().Warn("spool file not removed", "err", err)
	}
}

// audioUpload reads an uploaded audio request: multipart/form-data with a
// file part and fields (model, response_format, ...), or a raw audio body
// with the fields as query parameters (?model=). Every field is kept in
// fields for the handler to check. The file part (or the raw body) is
// never held in memory past the spool threshold; the other fields are
// bounded by maxFormField each and maxFormFields in number. A payload declared as audio/L16 (rate=N, channels=1 if
// given), in the Content-Type of the raw body or of the file part, is raw
// PCM16LE at N Hz: the engine input says {"sample_rate":N}
// (edge.upload-l16); any other payload is passed as is. The caller closes
// the upload when the request ends.
func audioUpload(r *http.Request) (*upload, error) {
	u, err := readUpload(r)
	if c := connFrom(r.Context()); c != nil && !bodyFailed(err) {
		c.bodyDone()
	}
	return u, err
}

func readUpload(r *http.Request) (*upload, error) {
	threshold, dir := int64(1<<20), ""
	if l := limitsFrom(r.Context()); l != nil {
		threshold, dir = l.threshold, l.spoolDir
	}
	u := &upload{}
	ct := r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt != "multipart/form-data" {
		in, err := declaredRate(ct)
		if err != nil {
			return nil, err
		}
		p, err := spoolBody(r.Body, threshold, dir)
		if err != nil {
			return nil, bodyError("reading the audio", err)
		}
		q := r.URL.Query()
		if len(q) > maxFormFields {
			p.Close()
			return nil, Invalid("more than %d query parameters", maxFormFields)
		}
		u.model, u.format, u.payload, u.input, u.fields = q.Get("model"), q.Get("response_format"), p, in, q
		return u, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, Invalid("multipart body: %v", err)
	}
	fail := func(err error) (*upload, error) {
		u.Close()
		return nil, err
	}
	nf := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(bodyError("multipart body", err))
		}
		switch name := part.FormName(); name {
		case "file":
			if u.payload != nil {
				return fail(InvalidParam("file", "multipart body has more than one file"))
			}
			in, err := declaredRate(part.Header.Get("Content-Type"))
			if err != nil {
				return fail(err)
			}
			p, err := spoolBody(part, threshold, dir)
			if err != nil {
				return fail(bodyError("multipart body", err))
			}
			u.payload, u.input, u.filename = p, in, part.FileName()
		default:
			limit := maxFormField
			if name == "known_speaker_references[]" {
				// A diarization request's reference audio (a file part or
				// a data URL), at most audio.MaxKnownSpeakers of them.
				if len(u.fields[name]) >= audio.MaxKnownSpeakers {
					return fail(InvalidParam("known_speaker_references[]", "more than %d known_speaker_references[]", audio.MaxKnownSpeakers))
				}
				limit = audio.MaxKnownSpeakerBytes*4/3 + 64
			}
			b, err := io.ReadAll(io.LimitReader(part, int64(limit)+1))
			if err != nil {
				return fail(bodyError("multipart body", err))
			}
			if len(b) > limit {
				return fail(Invalid("multipart field %.64q over %d bytes", name, limit))
			}
			if nf++; nf > maxFormFields {
				return fail(Invalid("multipart body has more than %d fields", maxFormFields))
			}
			if u.fields == nil {
				u.fields = map[string][]string{}
			}
			u.fields[name] = append(u.fields[name], string(b))
			switch name {
			case "model":
				u.model = string(b)
			case "response_format":
				u.format = string(b)
			}
		}
	}
	if u.payload == nil {
		return nil, InvalidParam("file", "multipart body has no file")
	}
	return u, nil
}

// declaredRate returns the engine input of a payload's Content-Type:
// {"sample_rate":N} for audio/L16;rate=N, nil for anything else. N is
// bounded by the upload bound (audio.MaxUploadRate, CONTRACT.md
// engine.upload-bounds), so a rate no engine would take is refused here,
// naming the header that set it.
func declaredRate(contentType string) (json.RawMessage, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "audio/l16" {
		return nil, nil
	}
	rate, err := strconv.Atoi(params["rate"])
	if err != nil || rate < audio.MinRate || rate > audio.MaxUploadRate {
		return nil, InvalidParam("Content-Type", "audio/L16 needs rate=N with N in %d..%d", audio.MinRate, audio.MaxUploadRate)
	}
	if ch, ok := params["channels"]; ok && ch != "1" {
		return nil, InvalidParam("Content-Type", "audio/L16 must be mono (channels=1), got channels=%s", ch)
	}
	return json.RawMessage(`{"sample_rate":` + strconv.Itoa(rate) + `}`), nil
}

// handleTranscription serves POST /v1/audio/transcriptions: an audio
// upload answered as json, text, verbose_json (segments, and words with
// timestamp_granularities[]=word), srt or vtt, or with stream=true as
// server-sent transcript.text.delta and transcript.text.done events. Every
// field is checked before a lease is taken (audio.ParseTranscription): an
// unknown or unusable one is 400 naming it; language is checked by the
// engine against the model's.
func (s *Server) handleTranscription(w http.ResponseWriter, r *http.Request) error {
	return s.transcribe(w, r, audio.ParseTranscription)
}

// transcribe is the path transcriptions and translations share: the
// upload, its fields checked by parse before a lease is taken, the
// engine's answer as the response_format asks (or, with stream=true,
// server-sent events).
func (s *Server) transcribe(w http.ResponseWriter, r *http.Request, parse func(map[string][]string) (audio.TranscriptionParams, error)) error {
	u, err := audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	p, err := parse(u.fields)
	if err != nil {
		return invalidRequest(err)
	}
	in, err := p.Input(u.input)
	if err != nil {
		return invalidRequest(err)
	}
	lease, err := s.taskLease(r, p.Model, "asr")
	if err != nil {
		return err
	}
	defer lease.Release(true)
	req := u.request(requestIDFrom(r.Context()))
	req.Input = in
	if p.Stream {
		req.Stream = true
		err := s.streamEvents(w, r, lease, req, audio.TranscriptEvents)
		u.Close()
		return err
	}
	out, err := lease.Infer(r.Context(), req, nil)
	u.Close() // the spool file goes before the answer is written
	if err != nil {
		return fromRuntime(err)
	}
	ct, body, err := audio.TranscriptionBody(out, p)
	if err != nil {
		return &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a transcription model", Err: err}
	}
	return writeTask(w, r, lease, ct, body)
}

// handleVoiceActivity serves POST /v1/audio/voice-activity: an audio
// upload with the fields audio.VoiceActivityFields (threshold,
// min_speech_ms, min_silence_ms, speech_pad_ms override the checkpoint's
// defaults; any other field is 400 naming it, before a lease is taken);
// the answer is {"segments":[{"start","end"}],"duration"} in seconds.
func (s *Server) handleVoiceActivity(w http.ResponseWriter, r *http.Request) error {
	u, err := audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	model, in, err := audio.ParseVoiceActivity(u.fields, u.input)
	if err != nil {
		return invalidRequest(err)
	}
	var v audio.VADResult
	lease, out, err := s.inferUpload(r, u, model, "vad", in, &v)
	if err != nil {
		return err
	}
	defer lease.Release(true)
	return writeTask(w, r, lease, jsonContentType[0], append(out.JSON, '\n'))
}

// inferUpload runs the upload u, with the engine input in, on a lease of
// model for task, and decodes the engine's JSON answer into result. The
// spool file is gone when it returns. On success the caller writes its
// answer and then releases the lease.
func (s *Server) inferUpload(r *http.Request, u *upload, model, task string, in json.RawMessage, result any) (*runtime.Lease, backends.Output, error) {
	lease, err := s.taskLease(r, model, task)
	if err != nil {
		return nil, backends.Output{}, err
	}
	req := u.request(requestIDFrom(r.Context()))
	req.Input = in
	out, err := lease.Infer(r.Context(), req, nil)
	u.Close() // the spool file goes before the answer is written
	if err == nil {
		if uerr := json.Unmarshal(out.JSON, result); uerr != nil {
			err = &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "not a " + task + " model", Err: uerr}
		}
	} else {
		err = fromRuntime(err)
	}
	if err != nil {
		lease.Release(true)
		return nil, backends.Output{}, err
	}
	return lease, out, nil
}
