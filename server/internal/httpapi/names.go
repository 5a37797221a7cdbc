package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/sluice-dev/sluice/internal/strictjson"
)

// ValidName reports whether s matches [A-Za-z0-9._-]{1,max} (without a
// regexp: it runs on every request).
func ValidName(s string, max int) bool {
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

// ValidModelID checks a model ID against [A-Za-z0-9._-]{1,128}; "." and
// ".." are refused too, since IDs may name folders.
func ValidModelID(id string) error {
	if !ValidName(id, 128) || id == "." || id == ".." {
		return InvalidParam("model", "model id %q must match [A-Za-z0-9._-]{1,128}", id)
	}
	return nil
}

// RequireJSON refuses a JSON route's request unless its Content-Type is
// application/json (parameters such as charset allowed): 415
// invalid_request_error unsupported_media_type (CONTRACT.md
// err.content-type). A browser can send text/plain or a form cross-site
// without a preflight; it cannot send application/json so.
func RequireJSON(r *http.Request) error {
	ct := HeaderValue(r.Header, "Content-Type")
	if ct == "application/json" { // what clients send, accepted as ParseMediaType would, without its parsing
		return nil
	}
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

// DecodeJSON decodes one JSON value of b into v strictly: unknown fields
// and trailing data are errors, and so are a key given twice in any object
// and a key that names a field of v only when case is ignored, at every
// nesting level (CONTRACT.md err.duplicate-keys: encoding/json would keep
// the last of two keys and match keys case-insensitively, so two readers
// of one body could disagree). It is the shared strict decoder
// (internal/strictjson), its refusals 400 invalid_request_error naming the
// key (param) and why (code).
func DecodeJSON(b []byte, v any) error {
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

// HeaderValue is h.Get(key) for a key in canonical form, as net/http
// makes every key it receives and Header.Set every key it is given: the
// map read without Get's canonicalisation of the key, which costs more
// than the read (a handful of header reads per request on the inference
// path, make bench-http).
func HeaderValue(h http.Header, canonicalKey string) string {
	if v := h[canonicalKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}
