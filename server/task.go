package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// The task lease the protocol adapters share (the OpenAI routes,
// server/internal/openai; the inference protocol's, server/internal/oip;
// the realtime sessions): they go through the same scheduler as
// /v1/models/{id}/infer, one lease per request, held until the answer is
// in memory and all but its last byte flushed.

// taskLease acquires a lease on model id with the header's admission
// timeout (these bodies have no admission_timeout_ms field). The model's
// task must be task: another is 400 invalid_request_error wrong_task,
// decided by the runtime where admission is decided: before the request
// queues or holds a slot, and again on the lease's own snapshot, the
// config its pool was built from, so a concurrent PUT that changes the
// task never hands this request a lease of the other task (CONTRACT.md
// err.wrong-task), and an engine is never asked for what it cannot
// produce.
func (s *Server) taskLease(r *http.Request, id, task string) (*runtime.Lease, error) {
	if err := httpapi.ValidModelID(id); err != nil {
		return nil, err
	}
	timeout, err := admissionTimeout(r, nil)
	if err != nil {
		return nil, err
	}
	lease, err := s.rt.AcquireTask(r.Context(), id, task, timeout)
	var te *runtime.TaskError
	if errors.As(err, &te) {
		got := "no task"
		if te.Have != "" {
			got = fmt.Sprintf("task %q", te.Have)
		}
		return nil, &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "wrong_task", Param: "model",
			Message: fmt.Sprintf("model %q serves %s; %s needs a %s model", id, got, r.URL.Path, task), Err: err}
	}
	if err != nil {
		return nil, httpapi.FromRuntime(err)
	}
	return lease, nil
}

// writeTask writes a finished task answer and releases the lease before
// its last byte (httpapi.WriteReleasing: a client's next request never finds this
// one's lease, CONTRACT.md phase.executing).
func writeTask(w http.ResponseWriter, r *http.Request, lease *runtime.Lease, contentType string, body []byte) error {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	werr := httpapi.WriteReleasing(r.Context(), w, body, func(failed bool) { lease.Release(failed) })
	if werr != nil {
		httpapi.Logger(r.Context()).Debug("answer not delivered", "err", werr)
	}
	return nil
}
