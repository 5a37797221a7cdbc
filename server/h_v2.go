package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// The Open Inference Protocol v2 over REST (CONTRACT.md "The Open
// Inference Protocol"): health, metadata and inference on the same runtime
// and scheduler as every other route; Triton's model-repository extension
// is in h_v2_repo.go, the tensors of each task in v2_tensor.go.

// Error headers of a /v2 error answer: the protocol's body carries only a
// message, so the machine-readable type and code travel beside it.
const (
	V2ErrorTypeHeader = "Sluice-Error-Type"
	V2ErrorCodeHeader = "Sluice-Error-Code"
)

// isV2 reports whether r is a request of the protocol's routes: its errors
// are written in the protocol's shape (CONTRACT.md oip.error-shape), the
// middleware's refusals (auth, Host, body limits, unknown routes) included.
func isV2(r *http.Request) bool {
	return r.URL.Path == "/v2" || strings.HasPrefix(r.URL.Path, "/v2/")
}

// writeV2Error writes e as {"error": msg} with its status, Retry-After
// (set by the caller) and the type and code headers.
func writeV2Error(w http.ResponseWriter, e *Error, msg string) {
	h := w.Header()
	h.Set(V2ErrorTypeHeader, e.Type)
	if e.Code != "" {
		h.Set(V2ErrorCodeHeader, e.Code)
	}
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(v2ErrorWire{Error: msg})
}

// v2False is the protocol's "false" for a health or readiness question: a
// 4xx (400), here with the reason as its error message.
func v2False(typ, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: typ, Code: "not_ready", Message: fmt.Sprintf(format, args...)}
}

// v2True answers a health question with 200 and an empty body.
func v2True(w http.ResponseWriter) error {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	return nil
}

// handleV2Live answers GET /v2/health/live: 200 while the process serves
// HTTP, during a shutdown's drain too (CONTRACT.md oip.live): a liveness
// probe that failed during the drain would have the pod killed.
func (s *Server) handleV2Live(w http.ResponseWriter, r *http.Request) error {
	return v2True(w)
}

// handleV2Ready answers GET /v2/health/ready (CONTRACT.md oip.ready): 200
// when the server is not shutting down and every model of the startup
// config is registered, wanted loaded and without a failed load since its
// last success (loaded at startup or since; a pool the server retired
// itself, idle or evicted, still counts: the next request reloads it).
// Otherwise 400 with the reason; from the moment a shutdown begins, 400 at
// once, while the listener still drains.
func (s *Server) handleV2Ready(w http.ResponseWriter, r *http.Request) error {
	if s.stopping.Load() || s.rt.ShuttingDown() {
		return v2False("shutting_down", "server is shutting down")
	}
	if id, why := s.notReady(); id != "" {
		return v2False("not_ready", "model %q of the startup config is %s", id, why)
	}
	return v2True(w)
}

// notReady returns the first startup model that keeps the server from
// being ready, and why; "" when there is none.
func (s *Server) notReady() (string, string) {
	ids := s.startupModels()
	if len(ids) == 0 {
		return "", ""
	}
	byID := map[string]core.ModelStatus{}
	for _, st := range s.rt.Status() {
		byID[st.ID] = st
	}
	for _, id := range ids {
		st, ok := byID[id]
		switch {
		case !ok && s.rt.Unregistered(id):
			continue // deleted on purpose (DELETE /v1/models/{id}): no longer waited for
		case !ok:
			return id, "not registered"
		case st.LoadFailures > 0:
			return id, fmt.Sprintf("not loaded: %d failed load(s) since its last success", st.LoadFailures)
		case !st.WantLoaded && !st.Loaded:
			return id, "unloaded"
		}
	}
	return "", ""
}

// startupModels returns the IDs the startup config named (RegisterModels).
func (s *Server) startupModels() []string {
	s.startupMu.Lock()
	defer s.startupMu.Unlock()
	return s.startup
}

// noteStartupModels records the startup config's IDs for readiness.
func (s *Server) noteStartupModels(models []ModelEntry) {
	s.startupMu.Lock()
	defer s.startupMu.Unlock()
	for _, m := range models {
		s.startup = append(s.startup, m.ID)
	}
}

// handleV2Server answers GET /v2: the server's name, version and the
// protocol extensions it serves.
func (s *Server) handleV2Server(w http.ResponseWriter, r *http.Request) error {
	v := BuildInfo().Version
	return writeJSON(w, V2ServerMetadata{Name: "sluice", Version: v, Extensions: []string{"model_repository"}})
}

// handleV2Model answers GET /v2/models/{m}: the model's inputs, outputs and
// request parameters for its task (CONTRACT.md oip.metadata), or 404.
func (s *Server) handleV2Model(w http.ResponseWriter, r *http.Request) error {
	id, err := v2ModelID(r)
	if err != nil {
		return err
	}
	st, err := s.rt.StatusOf(id)
	if err != nil {
		return fromRuntime(err)
	}
	md := V2ModelMetadata{Name: id, Versions: []string{strconv.FormatUint(st.ConfigVersion, 10)}, Platform: "sluice_" + st.Engine,
		Inputs: []V2TensorMetadata{}, Outputs: []V2TensorMetadata{}}
	if t, ok := v2Tasks[st.Task]; ok {
		md.Inputs, md.Outputs, md.Parameters = t.inputs, t.outputs, t.params
	}
	return writeJSON(w, md)
}

// handleV2ModelReady answers GET /v2/models/{m}/ready: 200 while M's pool
// is published (loaded), 400 while it is not, 404 for an unknown ID.
func (s *Server) handleV2ModelReady(w http.ResponseWriter, r *http.Request) error {
	id, err := v2ModelID(r)
	if err != nil {
		return err
	}
	st, err := s.rt.StatusOf(id)
	if err != nil {
		return fromRuntime(err)
	}
	if s.stopping.Load() || s.rt.ShuttingDown() {
		return v2False("shutting_down", "server is shutting down")
	}
	if !st.Loaded {
		return v2False("not_ready", "model %q is %s", id, st.State)
	}
	return v2True(w)
}

// v2ModelID is the {m} of a /v2 route, validated like every model ID.
func v2ModelID(r *http.Request) (string, error) {
	return modelID(r)
}

// handleV2Infer answers POST /v2/models/{m}/infer (CONTRACT.md oip.infer):
// the body is read and every tensor and parameter checked against the
// model's task before a lease is taken (400 naming what is wrong); then
// the lease is taken through the model's FIFO exactly as for
// /v1/models/{id}/infer (barriers, admission timeouts from the
// Sluice-Admission-Timeout-Ms header, 503 server_busy), the engine runs,
// and the answer is written and flushed before the lease is released.
func (s *Server) handleV2Infer(w http.ResponseWriter, r *http.Request) error {
	id, err := v2ModelID(r)
	if err != nil {
		return err
	}
	var req V2InferRequest
	if err := decodeStrict(r, &req); err != nil {
		return err
	}
	if len(req.ID) > maxV2RequestID {
		return InvalidParam("id", "id longer than %d bytes", maxV2RequestID)
	}
	st, err := s.rt.StatusOf(id)
	if err != nil {
		return fromRuntime(err)
	}
	t, ok := v2Tasks[st.Task]
	if !ok {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task",
			Message: fmt.Sprintf("model %q serves %s, which the inference protocol does not map (tts, asr and vad)", id, taskName(st.Task))}
	}
	breq, plan, err := t.request(&req)
	if err != nil {
		return err
	}
	lease, err := s.taskLease(r, id, st.Task)
	if err != nil {
		return err
	}
	defer lease.Release(true) // a no-op once released
	breq.ID = requestIDFrom(r.Context())
	out, err := lease.Infer(r.Context(), breq, nil)
	if err != nil {
		return fromRuntime(err)
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
	return writeTask(w, r, lease, jsonContentType[0], body)
}

// maxV2RequestID bounds the id a client may give a request (it is echoed).
const maxV2RequestID = 256
