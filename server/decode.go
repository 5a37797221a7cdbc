package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/sluice-dev/sluice/internal/strictjson"
	"github.com/sluice-dev/sluice/server/internal/edge"
)

// decodeStrict decodes one JSON value from r's body into v: a Content-Type
// other than application/json is 415 before anything is read (requireJSON);
// unknown, duplicate and case-folded fields, trailing data and bodies over
// the limit are 400 invalid_request_error. It reads the whole body first
// (readBody), so the connection's body phase ends before the handler goes
// on.
func decodeStrict(r *http.Request, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeJSONStrict(b, v)
}

// readBody reads r's JSON body to its end, bounded by the JSON limit
// (--max-json-body, edge.json-limit: 413 over it, refused before any read
// when the declared length is over it), and then ends the connection's
// body phase (edge.Body.End: every read deadline lifted before net/http's
// background read starts, CONTRACT.md time.shutdown-stalled-io,
// edge.body-timeout). The edge hands the limit and the end of the body
// phase to the reading as values; the decoder never sees the connection.
func readBody(r *http.Request) ([]byte, error) {
	body := edge.BodyOf(r.Context())
	return edge.ReadBody(r.Body, r.ContentLength, body.MaxJSON, body.End)
}

// requireJSON refuses a JSON route's request unless its Content-Type is
// application/json (parameters such as charset allowed): 415
// invalid_request_error unsupported_media_type (CONTRACT.md
// err.content-type). A browser can send text/plain or a form cross-site
// without a preflight; it cannot send application/json so.
func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	msg := "Content-Type must be application/json"
	if ct == "" {
		msg += " (the request has none)"
	} else {
		msg += fmt.Sprintf(", not %q", ct)
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type", Message: msg}
}

// decodeBytesStrict decodes one JSON value into v strictly: unknown fields
// and trailing data are errors (encoding/json), and so are a key given
// twice in any object and a key that names a field of v only when case is
// ignored, at every nesting level (CONTRACT.md err.duplicate-keys:
// encoding/json would keep the last of two keys and match keys
// case-insensitively, so two readers of one body could disagree).
func decodeBytesStrict(body io.Reader, v any) error {
	b, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return edge.TooLarge(tooBig.Limit)
		}
		return Invalid("reading the request body: %v", err)
	}
	return decodeJSONStrict(b, v)
}

// decodeJSONStrict is decodeBytesStrict on a body already read: the
// shared strict decoder (internal/strictjson), its refusals 400
// invalid_request_error naming the key (param) and why (code).
func decodeJSONStrict(b []byte, v any) error {
	err := strictjson.Decode(b, v)
	if err == nil {
		return nil
	}
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return Invalid("invalid JSON body: %v", err)
	}
	if se.Code == strictjson.CodeEmpty {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: se.Code, Message: "request body is empty"}
	}
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: se.Param, Code: se.Code,
		Message: "invalid JSON body: " + se.Msg, Err: err}
}

// validName reports whether s matches [A-Za-z0-9._-]{1,max} (without a
// regexp: it runs on every request).
func validName(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validModelID checks a model ID against [A-Za-z0-9._-]{1,128}; "." and ".."
// are refused too, since IDs may name folders.
func validModelID(id string) error {
	if !validName(id, 128) || id == "." || id == ".." {
		return InvalidParam("model", "model id %q must match [A-Za-z0-9._-]{1,128}", id)
	}
	return nil
}

// DecodeModelSpec decodes a model spec (the JSON body of PUT
// /v1/models/{id}) strictly: unknown fields and trailing data are errors.
func DecodeModelSpec(b []byte, s *ModelSpec) error {
	return decodeJSONStrict(b, s)
}

// decodeOptional decodes a JSON body that may be empty ({} is implied):
// like every JSON route it needs Content-Type application/json (415
// without, CONTRACT.md err.content-type), and it is decoded strictly.
func decodeOptional(r *http.Request, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	b, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return decodeJSONStrict(b, v)
}
