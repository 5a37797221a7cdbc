package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// decodeStrict decodes one JSON value from r's body into v: unknown fields,
// trailing data and bodies over the limit are 400 invalid_request_error.
// It reads the whole body first (readBody), so the connection's body phase
// ends before the handler goes on.
func decodeStrict(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeBytesStrict(bytes.NewReader(b), v)
}

// readBody reads r's JSON body to its end, bounded by the JSON limit
// (--max-json-body, 413 over it, refused before any read when the declared
// length is over it), and then tells the connection tracker that the body
// phase is over, which lifts every read deadline (the shutdown slice's and
// the body reader's, CONTRACT.md time.shutdown-stalled-io, edge.body-timeout)
// before net/http's background read starts watching for a disconnect: a
// read deadline left on a connection whose body was consumed would cancel
// the request's context. A body that timed out keeps its expired deadline:
// its answer (408) closes the connection.
func readBody(r *http.Request) ([]byte, error) {
	limit := int64(1 << 20)
	if l := limitsFrom(r.Context()); l != nil {
		limit = l.maxJSON
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = &http.MaxBytesError{Limit: limit}
	}
	if c := connFrom(r.Context()); c != nil && !bodyFailed(err) {
		c.bodyDone()
	}
	if err != nil {
		return nil, bodyError("reading the request body", err)
	}
	return b, nil
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
