package openai

import (
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// upload is an uploaded audio request: its fields and its payload, in
// memory or spooled to a temporary file (CONTRACT.md edge.upload-spool).
type upload struct {
	model, format string
	filename      string              // the multipart file part's name ("" for a raw body)
	fields        map[string][]string // every field but file (multipart) or query parameter, as sent
	payload       Payload
	input         json.RawMessage // {"sample_rate":N} for a declared audio/L16 payload
}

// MaxFormFields bounds the fields of one upload (besides the file).
const MaxFormFields = 32

// request is the engine request of the upload: the payload as Body (a
// backends.Blob, valid until the handler returns), and also as Data when
// it is in memory anyway.
func (u *upload) request(id string) backends.Request {
	return backends.Request{ID: id, Input: u.input, Data: u.payload.Bytes(), Body: u.payload.Blob()}
}

// Close removes the spool file, if any.
func (u *upload) Close() {
	if u.payload == nil {
		return
	}
	if err := u.payload.Close(); err != nil {
		slog.Default().Warn("spool file not removed", "err", err)
	}
}

// audioUpload reads an uploaded audio request: multipart/form-data with a
// file part and fields (model, response_format, ...), or a raw audio body
// with the fields as query parameters (?model=). Every field is kept in
// fields for the handler to check. The file part (or the raw body) is
// never held in memory past the spool threshold; the other fields are
// bounded by Deps.MaxFormField each and MaxFormFields in number. A
// payload declared as audio/L16 (rate=N, channels=1 if given), in the
// Content-Type of the raw body or of the file part, is raw PCM16LE at N
// Hz: the engine input says {"sample_rate":N} (edge.upload-l16); any other
// payload is passed as is. The caller closes the upload when the request
// ends.
func (h *Handlers) audioUpload(r *http.Request) (*upload, error) {
	u, err := h.readUpload(r)
	h.d.BodyDone(r, err)
	return u, err
}

func (h *Handlers) readUpload(r *http.Request) (*upload, error) {
	u := &upload{}
	ct := r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt != "multipart/form-data" {
		in, err := declaredRate(ct)
		if err != nil {
			return nil, err
		}
		p, err := h.d.Spool(r, r.Body)
		if err != nil {
			return nil, h.d.BodyError("reading the audio", err)
		}
		q := r.URL.Query()
		if len(q) > MaxFormFields {
			_ = p.Close()
			return nil, httpapi.InvalidParam("query", "more than %d query parameters", MaxFormFields)
		}
		u.model, u.format, u.payload, u.input, u.fields = q.Get("model"), q.Get("response_format"), p, in, q
		return u, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, httpapi.InvalidParam("file", "multipart body: %v", err)
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
			return fail(h.d.BodyError("multipart body", err))
		}
		switch name := part.FormName(); name {
		case "file":
			if u.payload != nil {
				return fail(httpapi.InvalidParam("file", "multipart body has more than one file"))
			}
			in, err := declaredRate(part.Header.Get("Content-Type"))
			if err != nil {
				return fail(err)
			}
			p, err := h.d.Spool(r, part)
			if err != nil {
				return fail(h.d.BodyError("multipart body", err))
			}
			u.payload, u.input, u.filename = p, in, part.FileName()
		default:
			limit := h.d.MaxFormField
			if name == "known_speaker_references[]" {
				// A diarization request's reference audio (a file part or
				// a data URL), at most audio.MaxKnownSpeakers of them.
				if len(u.fields[name]) >= audio.MaxKnownSpeakers {
					return fail(httpapi.InvalidParam("known_speaker_references[]", "more than %d known_speaker_references[]", audio.MaxKnownSpeakers))
				}
				limit = audio.MaxKnownSpeakerBytes*4/3 + 64
			}
			b, err := io.ReadAll(io.LimitReader(part, int64(limit)+1))
			if err != nil {
				return fail(h.d.BodyError("multipart body", err))
			}
			if len(b) > limit {
				return fail(httpapi.InvalidParam(clip(name), "multipart field %.64q over %d bytes", name, limit))
			}
			if nf++; nf > MaxFormFields {
				return fail(httpapi.InvalidParam(clip(name), "multipart body has more than %d fields", MaxFormFields))
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
		return nil, httpapi.InvalidParam("file", "multipart body has no file")
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
		return nil, httpapi.InvalidParam("Content-Type", "audio/L16 needs rate=N with N in %d..%d", audio.MinRate, audio.MaxUploadRate)
	}
	if ch, ok := params["channels"]; ok && ch != "1" {
		return nil, httpapi.InvalidParam("Content-Type", "audio/L16 must be mono (channels=1), got channels=%s", ch)
	}
	return json.RawMessage(`{"sample_rate":` + strconv.Itoa(rate) + `}`), nil
}
