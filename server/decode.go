package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
)

// decodeStrict decodes one JSON value from r's body into v: unknown fields,
// trailing data and bodies over the limit are 400 invalid_request_error.
func decodeStrict(r *http.Request, v any) error {
	return decodeBytesStrict(r.Body, v)
}

func decodeBytesStrict(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "body_too_large",
				Message: fmt.Sprintf("request body over %d bytes", tooBig.Limit)}
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

var modelIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// validModelID checks a model ID against [A-Za-z0-9._-]{1,128}; "." and ".."
// are refused too, since IDs may name folders.
func validModelID(id string) error {
	if !modelIDPattern.MatchString(id) || id == "." || id == ".." {
		return Invalid("model id %q must match [A-Za-z0-9._-]{1,128}", id)
	}
	return nil
}

// canonicalJSON re-encodes a JSON object with sorted keys and no spaces, so
// equal options compare equal.
func canonicalJSON(raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "{}", nil
	}
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", Invalid("options must be a JSON object: %v", err)
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return "", Invalid("options: %v", err)
	}
	return string(b), nil
}
