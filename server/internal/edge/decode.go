package edge

import (
	"bytes"
	"net/http"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Decode decodes one JSON value from r's body into v: a Content-Type
// other than application/json is 415 before anything is read
// (httpapi.RequireJSON); unknown, duplicate and case-folded fields,
// trailing data and bodies over the limit are 400 invalid_request_error
// (httpapi.DecodeJSON). It reads the whole body first (readJSON), so the
// connection's body phase ends before the handler goes on.
func Decode(r *http.Request, v any) error {
	if err := httpapi.RequireJSON(r); err != nil {
		return err
	}
	b, err := readJSON(r)
	if err != nil {
		return err
	}
	return httpapi.DecodeJSON(b, v)
}

// DecodeOptional is Decode for a body that may be empty ({} is implied):
// like every JSON route it needs Content-Type application/json (415
// without, CONTRACT.md err.content-type), and it is decoded strictly.
func DecodeOptional(r *http.Request, v any) error {
	if err := httpapi.RequireJSON(r); err != nil {
		return err
	}
	b, err := readJSON(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return httpapi.DecodeJSON(b, v)
}

// readJSON reads r's JSON body to its end, bounded by the JSON limit
// (--max-json-body, edge.json-limit: 413 over it, refused before any read
// when the declared length is over it), and then ends the connection's
// body phase (Body.End: every read deadline lifted before net/http's
// background read starts, CONTRACT.md time.shutdown-stalled-io,
// edge.body-timeout).
func readJSON(r *http.Request) ([]byte, error) {
	body := BodyOf(r.Context())
	return ReadBody(r.Body, r.ContentLength, body.MaxJSON, body.End)
}
