package server

import (
	"io"
	"net/http"

	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/openai"
)

// openaiHandlers wires the OpenAI routes' adapter (server/internal/openai)
// to the runtime, the task lease, the edge's body reading and spooling and
// the event stream /v1/models/{id}/infer uses.
func (s *Server) openaiHandlers() *openai.Handlers {
	return openai.New(openai.Deps{
		Runtime:         s.rt,
		Engines:         s.roots.Engines(),
		ValidModelID:    httpapi.ValidModelID,
		Lease:           s.taskLease,
		WriteTask:       writeTask,
		Spool:           spoolUpload,
		BodyError:       edge.BodyError,
		BodyDone:        func(r *http.Request, err error) { edge.BodyOf(r.Context()).End(err) },
		MaxFormField:    edge.MaxFormField,
		RefuseDrain:     edge.RefuseDrain,
		StreamEvents:    s.streamEvents,
		WriteErrorEvent: writeErrorEvent,
	})
}

// spoolUpload spools an upload's payload under the request's body limits
// (CONTRACT.md edge.upload-spool).
func spoolUpload(r *http.Request, body io.Reader) (openai.Payload, error) {
	b := edge.BodyOf(r.Context())
	p, err := edge.Spool(body, b.SpoolThreshold, b.SpoolDir)
	if err != nil {
		return nil, err
	}
	return spooledPayload{p}, nil
}

// spooledPayload is a spooled upload as the adapter reads it.
type spooledPayload struct{ *edge.Spooled }

// Bytes is the payload when it is in memory, else nil.
func (p spooledPayload) Bytes() []byte { return p.Data }
