// Package oip serves the Open Inference Protocol v2 over REST (KServe's
// v2 protocol, shared with Triton; CONTRACT.md "The Open Inference
// Protocol"): health, metadata and inference on the same runtime and
// scheduler as every other route, Triton's model-repository extension
// (repo.go) on the registry's managers, the tensors of each task
// (tensor.go), and the protocol's own error body (errors.go).
//
// It is a thin adapter: it never imports package server. It calls the
// layers below it directly (httpapi: the request's ID, the runtime-error
// mapping; edge: the strict JSON decoders). The server wires a Host (the
// runtime, the edge's task lease, the registry's load and unload) and
// mounts the Handlers' methods on its router behind its own middleware
// (Host and Origin checks, keys, body limits), with Scope outermost so
// that every error under /v2 is written in the protocol's shape.
package oip

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Runtime is what the protocol reads of the runtime.
type Runtime interface {
	Status() []core.ModelStatus
	StatusOf(id string) (core.ModelStatus, error)
	// Resolve is the model ID a name means now (an ID or an alias).
	Resolve(name string) (string, bool)
	Unregistered(id string) bool
	ShuttingDown() bool
}

// Host is what the server lends the protocol: each field is the server's
// own implementation, so that a /v2 route behaves as its /v1 twin.
type Host struct {
	Runtime  Runtime
	Version  string      // the build's version, answered by GET /v2
	Stopping func() bool // the server's shutdown has begun
	// StartupModels returns the IDs of the startup config's models, which
	// readiness waits for.
	StartupModels func() []string
	// StartupFailure reports whether a startup model's load at start
	// failed and has not been seen resolved; with resolved true it
	// forgets that failure for good.
	StartupFailure func(id string, resolved bool) bool
	// ModelID is the validated {id} of a route.
	ModelID func(r *http.Request) (string, error)
	// Lease takes a lease on model id for task through the model's FIFO,
	// with the request's admission timeout (as /v1 does).
	Lease func(r *http.Request, id, task string) (*runtime.Lease, error)
	// WriteTask writes a finished answer and releases the lease once the
	// bytes are flushed.
	WriteTask func(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, contentType string, body []byte) error
	// Load and Unload are the registry's managers (POST
	// /v1/models/{id}/load and /unload); an error is already mapped for
	// the API (a change that is not durable is a 500).
	Load, Unload func(ctx context.Context, id string) error
}

// Handlers serves the protocol's routes; each method returns its error for
// the server's error writer.
type Handlers struct {
	h Host
}

// New returns the protocol's handlers over h.
func New(h Host) *Handlers { return &Handlers{h: h} }

// v2False is the protocol's "false" for a health or readiness question: a
// 4xx (400), here with the reason as its error message, and the answer's
// own field beside it: {"ready": false, "error": ...} (and the model's
// "name" for a model's readiness), so that a client that reads the body
// and one that reads the status agree (CONTRACT.md oip.ready).
func v2False(name, typ, format string, args ...any) *httpapi.Error {
	return &httpapi.Error{Status: http.StatusBadRequest, Type: typ, Code: "not_ready", Message: fmt.Sprintf(format, args...),
		Err: notReady{name: name}}
}

// notReady marks a health answer's false (v2False): WriteError adds
// "ready": false, and the model's name for a model's readiness.
type notReady struct{ name string }

func (n notReady) Error() string { return "not ready" }

// LiveAnswer is the body of GET /v2/health/live.
type LiveAnswer struct {
	Live bool `json:"live"`
}

// ReadyAnswer is the body of GET /v2/health/ready and, with the model's
// name, of GET /v2/models/{m}/ready.
type ReadyAnswer struct {
	Name  string `json:"name,omitempty"`
	Ready bool   `json:"ready"`
}

// stopping reports whether a shutdown has begun (the server's or the
// runtime's).
func (p *Handlers) stopping() bool { return p.h.Stopping() || p.h.Runtime.ShuttingDown() }

// Live answers GET (and HEAD) /v2/health/live: 200 {"live": true} while
// the process serves HTTP, during a shutdown's drain too (CONTRACT.md
// oip.live): a liveness probe that failed during the drain would have the
// pod killed.
func (p *Handlers) Live(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, LiveAnswer{Live: true})
}

// Ready answers GET (and HEAD) /v2/health/ready (CONTRACT.md oip.ready):
// 200 {"ready": true} when the server is not shutting down and every model
// of the startup config was registered (or deleted since), none holding a
// failed load at start that nothing has resolved yet. What the operator
// does later (an unload, a reconfigure, a failed load of a model that had
// loaded) never takes the replica out of rotation: the replica still
// serves its other models, and a proxy's health check would take them
// all away. Otherwise 400 {"ready": false, "error": reason}; from the
// moment a shutdown begins, 400 at once, while the listener still drains.
func (p *Handlers) Ready(w http.ResponseWriter, r *http.Request) error {
	if p.stopping() {
		return v2False("", "shutting_down", "server is shutting down")
	}
	if id, why := p.notReady(); id != "" {
		return v2False("", "not_ready", "model %q of the startup config is %s", id, why)
	}
	return writeJSON(w, ReadyAnswer{Ready: true})
}

// notReady returns the first startup model that keeps the server from
// being ready, and why; "" when there is none.
func (p *Handlers) notReady() (string, string) {
	ids := p.h.StartupModels()
	if len(ids) == 0 {
		return "", ""
	}
	rt := p.h.Runtime
	byID := map[string]core.ModelStatus{}
	for _, st := range rt.Status() {
		byID[st.ID] = st
	}
	for _, id := range ids {
		st, ok := byID[id]
		switch {
		case !ok && rt.Unregistered(id):
			continue // deleted on purpose (DELETE /v1/models/{id}): no longer waited for
		case !ok:
			return id, "not registered"
		case !p.h.StartupFailure(id, false):
			continue // loaded at start: whatever happened since, the replica serves
		case st.Loaded || st.LoadFailures == 0:
			// Loaded since, or a granted manager (load, unload, PUT)
			// cleared its failures: the operator acted on it.
			p.h.StartupFailure(id, true)
		default:
			return id, fmt.Sprintf("not loaded: its load at start failed (%d failed load(s)) and no load or manager has succeeded since", st.LoadFailures)
		}
	}
	return "", ""
}

// Server answers GET /v2: the server's name, version and the protocol
// extensions it serves.
func (p *Handlers) Server(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, V2ServerMetadata{Name: "sluice", Version: p.h.Version, Extensions: []string{"model_repository"}})
}

// statusOf is the status of the model id names (its ID or an alias:
// CONTRACT.md names.alias-resolve), its error mapped for the API. A lease
// resolves the name again in its own admission, and checks the task.
func (p *Handlers) statusOf(id string) (core.ModelStatus, error) {
	if canon, ok := p.h.Runtime.Resolve(id); ok {
		id = canon
	}
	st, err := p.h.Runtime.StatusOf(id)
	if err != nil {
		return st, httpapi.FromRuntime(err)
	}
	return st, nil
}

// versionParam is the {version} of a versioned route
// (/v2/models/{m}/versions/{v}/...), "" on an unversioned one.
func versionParam(r *http.Request) string { return r.PathValue("version") }

// checkVersion refuses a versioned route's version unless it is the one
// the model's metadata advertises, its config_version (CONTRACT.md
// oip.versions): 404 naming both.
func checkVersion(id, want string, have uint64) error {
	if want == "" || want == strconv.FormatUint(have, 10) {
		return nil
	}
	return &httpapi.Error{Status: http.StatusNotFound, Type: "not_found_error", Code: "version_not_found", Param: "version",
		Message: fmt.Sprintf("model %q has no version %.32q: its only version is %q (GET /v2/models/%s)", id, want, strconv.FormatUint(have, 10), id)}
}

// model is the validated {id} of a route and its status, with the
// route's {version}, if any, checked against it.
func (p *Handlers) model(r *http.Request) (string, core.ModelStatus, error) {
	id, err := p.h.ModelID(r)
	if err != nil {
		return "", core.ModelStatus{}, err
	}
	st, err := p.statusOf(id)
	if err != nil {
		return "", st, err
	}
	return id, st, checkVersion(id, versionParam(r), st.ConfigVersion)
}

// Model answers GET /v2/models/{m} and /v2/models/{m}/versions/{v}: the
// model's inputs, outputs and request parameters for its task (CONTRACT.md
// oip.metadata), or 404.
func (p *Handlers) Model(w http.ResponseWriter, r *http.Request) error {
	id, st, err := p.model(r)
	if err != nil {
		return err
	}
	md := V2ModelMetadata{Name: id, Versions: []string{strconv.FormatUint(st.ConfigVersion, 10)}, Platform: "sluice_" + st.Engine,
		Inputs: []V2TensorMetadata{}, Outputs: []V2TensorMetadata{}}
	if t, ok := v2Tasks[st.Task]; ok {
		md.Inputs, md.Outputs, md.Parameters = t.inputs, t.outputs, t.params
	}
	return writeJSON(w, md)
}

// ModelReady answers GET (and HEAD) /v2/models/{m}/ready and
// /v2/models/{m}/versions/{v}/ready: 200 {"name", "ready": true} while M's
// pool is published (loaded), 400 {"name", "ready": false, "error"} while
// it is not, 404 for an unknown ID or version.
func (p *Handlers) ModelReady(w http.ResponseWriter, r *http.Request) error {
	id, st, err := p.model(r)
	if err != nil {
		return err
	}
	if p.stopping() {
		return v2False(id, "shutting_down", "server is shutting down")
	}
	if !st.Loaded {
		return v2False(id, "not_ready", "model %q is %s", id, st.State)
	}
	return writeJSON(w, ReadyAnswer{Name: id, Ready: true})
}

// Infer answers POST /v2/models/{m}/infer and
// /v2/models/{m}/versions/{v}/infer (CONTRACT.md oip.infer): the body is
// read and every tensor and parameter checked against the model's task
// before a lease is taken (400 naming what is wrong); then the lease is
// taken through the model's FIFO exactly as for /v1/models/{id}/infer
// (barriers, admission timeouts from the Sluice-Admission-Timeout-Ms
// header, 503 server_busy), the engine runs, and the answer is written and
// flushed before the lease is released. A versioned request is answered
// by that version only: one whose model was reconfigured while it waited
// is 404, before the engine runs.
func (p *Handlers) Infer(w http.ResponseWriter, r *http.Request) error {
	id, err := p.h.ModelID(r)
	if err != nil {
		return err
	}
	var req V2InferRequest
	if err := edge.Decode(r, &req); err != nil {
		return err
	}
	if len(req.ID) > maxV2RequestID {
		return httpapi.InvalidParam("id", "id longer than %d bytes", maxV2RequestID)
	}
	st, err := p.statusOf(id)
	if err != nil {
		return err
	}
	version := versionParam(r)
	if err := checkVersion(id, version, st.ConfigVersion); err != nil {
		return err
	}
	t, ok := v2Tasks[st.Task]
	if !ok {
		return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task",
			Message: fmt.Sprintf("model %q serves %s, which the inference protocol does not map (tts, asr and vad)", id, taskName(st.Task))}
	}
	breq, plan, err := t.request(&req)
	if err != nil {
		return err
	}
	lease, err := p.h.Lease(r, id, st.Task)
	if err != nil {
		return err
	}
	defer lease.Release(true) // a no-op once released
	if err := checkVersion(id, version, lease.Version()); err != nil {
		return err
	}
	breq.ID = httpapi.RequestID(r.Context())
	out, err := lease.Infer(r.Context(), breq, nil)
	if err != nil {
		return httpapi.FromRuntime(err)
	}
	outputs, err := t.answer(out, plan)
	if err != nil {
		return err
	}
	resp := V2InferResponse{ModelName: id, ModelVersion: strconv.FormatUint(lease.Version(), 10), ID: req.ID, Outputs: outputs}
	if resp.ID == "" {
		resp.ID = breq.ID
	}
	body, err := encodeV2Response(&resp)
	if err != nil {
		return err
	}
	return p.h.WriteTask(w, r, lease, "application/json", body)
}

// maxV2RequestID bounds the id a client may give a request (it is echoed).
const maxV2RequestID = 256
