package server

import (
	"io"
	"net/http"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/server/internal/openai"
)

// openaiHandlers wires the OpenAI routes' adapter (server/internal/openai)
// to the runtime, the task lease, the edge's body reading and spooling and
// the event stream /v1/models/{id}/infer uses.
func (s *Server) openaiHandlers() *openai.Handlers {
	return openai.New(openai.Deps{
		Runtime:         s.rt,
		Engines:         s.roots.engines,
		ValidModelID:    validModelID,
		Lease:           s.taskLease,
		WriteTask:       writeTask,
		Decode:          decodeStrict,
		Spool:           spoolUpload,
		BodyError:       bodyError,
		BodyDone:        uploadRead,
		MaxFormField:    maxFormField,
		RefuseDrain:     refuseDrain,
		StreamEvents:    s.streamEvents,
		WriteErrorEvent: writeErrorEvent,
		RequestID:       requestIDFrom,
		Logger:          logger,
		FromRuntime:     fromRuntime,
	})
}

// spoolUpload spools an upload's payload under the request's body limits
// (CONTRACT.md edge.upload-spool).
func spoolUpload(r *http.Request, body io.Reader) (openai.Payload, error) {
	threshold, dir := int64(1<<20), ""
	if l := limitsFrom(r.Context()); l != nil {
		threshold, dir = l.threshold, l.spoolDir
	}
	p, err := spoolBody(body, threshold, dir)
	if err != nil {
		return nil, err
	}
	return spooledPayload{p}, nil
}

// spooledPayload is a spooled upload as the adapter reads it.
type spooledPayload struct{ *spooled }

// Bytes is the payload when it is in memory, else nil.
func (p spooledPayload) Bytes() []byte { return p.data }

// Blob is the payload for the engine.
func (p spooledPayload) Blob() backends.Blob { return p.blob() }

// uploadRead tells the connection tracker that an upload's body phase is
// over (unless the body reader itself failed: the connection keeps its
// expired read deadline and closes).
func uploadRead(r *http.Request, err error) {
	if c := connFrom(r.Context()); c != nil && !bodyFailed(err) {
		c.bodyDone()
	}
}
