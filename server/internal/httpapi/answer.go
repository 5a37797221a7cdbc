package httpapi

import (
	"net/http"
)

// WriteReleasing writes a complete, non-streamed answer body and releases
// its lease (release(failed)) before the body's last byte is written: the
// answer is whole in memory, so the slot is no longer needed, and a client
// that sends its next request as soon as it has read this answer never
// finds this request's lease still held (CONTRACT.md phase.executing).
// Everything but the last byte is written and
// flushed first, so a client that went away is still recorded as a failed
// request. It returns the write error, if any.
func WriteReleasing(w http.ResponseWriter, body []byte, release func(failed bool)) error {
	if len(body) == 0 {
		release(false)
		return nil
	}
	_, werr := w.Write(body[:len(body)-1])
	if werr == nil {
		werr = http.NewResponseController(w).Flush()
	}
	release(werr != nil)
	if werr != nil {
		return werr
	}
	_, werr = w.Write(body[len(body)-1:])
	return werr
}
