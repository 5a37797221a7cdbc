package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
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
	return decodeBytesStrict(bytes.NewReader(b), v)
}

// readBody reads r's body to its end (bounded by the body limit) and then
// tells the connection tracker that the body phase is over, which lifts any
// shutdown read deadline before net/http's background read starts watching
// for a disconnect (CONTRACT.md time.shutdown-stalled-io): a read deadline
// left on a connection whose body was consumed would cancel the request's
// context.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if c := connFrom(r.Context()); c != nil {
		c.bodyDone()
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooLarge(tooBig.Limit)
		}
		return nil, Invalid("reading the request body: %v", err)
	}
	return b, nil
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

func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "body_too_large",
		Message: fmt.Sprintf("request body over %d bytes", limit)}
}

func decodeBytesStrict(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return tooLarge(tooBig.Limit)
		}
		if errors.Is(err, io.EOF) {
			return Invalid("request body is empty")
		}
		return Invalid("invalid JSON body: %v", err)
	}
	if dec.More() {
		return Invalid("invalid JSON body: trailing data after the JSON value")
	}
	var rest [1]byte
	if n, _ := io.ReadFull(dec.Buffered(), rest[:]); n > 0 && !isSpace(rest[0]) {
		return Invalid("invalid JSON body: trailing data after the JSON value")
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

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
		return Invalid("model id %q must match [A-Za-z0-9._-]{1,128}", id)
	}
	return nil
}

// DecodeModelSpec decodes a model spec (the JSON body of PUT
// /v1/models/{id}) strictly: unknown fields and trailing data are errors.
func DecodeModelSpec(b []byte, s *ModelSpec) error {
	return decodeBytesStrict(bytes.NewReader(b), s)
}
