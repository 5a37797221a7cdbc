// Package openai serves the OpenAI-compatible audio routes (CONTRACT.md
// openai.*, audio.*, diar.*): speech (whole or streamed), transcriptions
// and translations, voice activity, diarization and speaker embeddings
// (speaches' routes), and the voices of the speech models. It holds their
// wire shapes (params.go, diarization.go): the bodies and form fields,
// checked before any lease and mapped onto the engine requests of
// backends/audio, and the engine results rendered as OpenAI answers them.
// Engines never see these shapes.
//
// It is a thin adapter: it never imports package server. It calls the
// layers below it directly (httpapi: the request's ID and logger, the
// runtime-error mapping; edge: the strict JSON decoder). The server wires
// Deps (the runtime, the task lease, the edge's spooling and body
// accounting, its event stream) and mounts the Handlers' methods on its
// router behind its own middleware; each method returns its error for the
// server's error writer.
package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Runtime is what the routes read of the runtime.
type Runtime interface {
	Status() []core.ModelStatus
	StatusOf(id string) (core.ModelStatus, error)
	ConfigOf(id string) (core.Config, core.ModelStatus, error)
	// Resolve is the model ID a name means now (an ID or an alias;
	// CONTRACT.md names.alias-resolve). Task routes never call it: their
	// lease resolves the name in its own admission.
	Resolve(name string) (string, bool)
}

// Payload is an upload's audio as the edge spooled it: in memory up to the
// spool threshold, else in a temporary file that Close removes (CONTRACT.md
// edge.upload-spool). Close is safe to call twice.
type Payload interface {
	// Bytes is the payload when it is in memory, else nil.
	Bytes() []byte
	// Blob is the payload for the engine (valid until Close).
	Blob() backends.Blob
	Close() error
}

// Deps is what the server lends the routes: each field is the server's own
// implementation, so that these routes behave as every other.
type Deps struct {
	Runtime Runtime
	// Engines are the served engines, by name (the voices' listers).
	Engines backends.Registry
	// ValidModelID refuses a malformed model ID (a 400 naming model).
	ValidModelID func(id string) error
	// Lease takes a lease on model id for task with the request's
	// admission timeout: the task check and the lease are one runtime
	// decision (runtime.AcquireTask; CONTRACT.md err.wrong-task), a model
	// of another task a 400 wrong_task before the request queues.
	Lease func(r *http.Request, id, task string) (*runtime.Lease, error)
	// WriteTask writes a finished answer and releases the lease once the
	// bytes are flushed (or the write failed).
	WriteTask func(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, contentType string, body []byte) error
	// Spool reads body (a raw upload or a multipart file part) to its end
	// under the edge's limits, spooling past the threshold.
	Spool func(r *http.Request, body io.Reader) (Payload, error)
	// BodyError maps an error of reading the request body to its answer
	// (413, 408, 503 body budget, else 400 saying what was read).
	BodyError func(what string, err error) error
	// BodyDone tells the edge that r's body has been read (err: how the
	// read ended), lifting its read deadlines.
	BodyDone func(r *http.Request, err error)
	// MaxFormField bounds a multipart field other than the file.
	MaxFormField int
	// RefuseDrain bounds how long the rest of a body refused unread may be
	// read to keep the connection.
	RefuseDrain time.Duration
	// StreamEvents runs req on lease and answers with one server-sent
	// event per event events makes of each engine chunk. The events
	// closing reports true for are held until the engine returned and
	// sent last, with [DONE], the lease released before their last byte
	// (CONTRACT.md phase.stream-deferred).
	StreamEvents func(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, req backends.Request,
		events func(json.RawMessage) ([][]byte, error), closing func([]byte) bool) error
	// WriteErrorEvent ends a started event stream with an error event.
	WriteErrorEvent func(w http.ResponseWriter, rc *http.ResponseController, buf []byte, e *httpapi.Error)
}

// Handlers serves the OpenAI routes.
type Handlers struct {
	d Deps
}

// New returns the routes' handlers over d. Every route answers a model
// name that names no model as OpenAI does: 404 with param "model" and
// code model_not_found (httpapi.ModelNotFound; CONTRACT.md err.not-found),
// whether the lease or a status read found it unknown.
func New(d Deps) *Handlers {
	if lease := d.Lease; lease != nil {
		d.Lease = func(r *http.Request, id, task string) (*runtime.Lease, error) {
			l, err := lease(r, id, task)
			return l, httpapi.ModelNotFoundErr(err)
		}
	}
	return &Handlers{d: d}
}

// jsonType is the content type of a JSON answer.
const jsonType = "application/json"

// writeJSON writes v as a 200 JSON answer.
func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("openai: encode response: %w", err)
	}
	w.Header().Set("Content-Type", jsonType)
	_, err = w.Write(append(b, '\n'))
	return err
}
