package httpapi

import (
	"context"
	"net/http"
)

// WriteReleasing writes a complete, non-streamed answer body and releases
// its lease (release(failed)) before the body's last byte is written: the
// answer is whole in memory, so the slot is no longer needed, and a client
// that sends its next request as soon as it has read this answer never
// finds this request's lease still held (CONTRACT.md phase.executing).
// Everything but the last byte goes into the response's buffer first, with
// no flush of its own: the answer leaves in one write when the handler
// returns, and since its last byte is written after the release, no client
// can read the whole answer before the slot is free. The request counts as
// failed when that write fails or the client is already gone (ctx ended:
// net/http ends a request's context when its connection closes). A flush
// before the release cost a second write system call per answer, about
// half of the serving path's overhead over a bare handler (make
// bench-http), and told little more: a write to a socket whose peer has
// just closed usually succeeds. It returns the write error, if any.
func WriteReleasing(ctx context.Context, w http.ResponseWriter, body []byte, release func(failed bool)) error {
	if len(body) == 0 {
		release(ctx.Err() != nil)
		return nil
	}
	_, werr := w.Write(body[:len(body)-1])
	release(werr != nil || ctx.Err() != nil)
	if werr != nil {
		return werr
	}
	_, werr = w.Write(body[len(body)-1:])
	return werr
}
