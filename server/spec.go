package server

import (
	"encoding/json"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// ModelSpec is the body of PUT /v1/models/{id}.
type ModelSpec struct {
	Engine             string          `json:"engine"`
	Checkpoint         string          `json:"checkpoint"`
	Task               string          `json:"task"`
	Slots              json.RawMessage `json:"slots,omitempty"`
	Options            json.RawMessage `json:"options,omitempty"`
	AdmissionTimeoutMS *int64          `json:"admission_timeout_ms,omitempty"`
	MaxQueue           *int            `json:"max_queue,omitempty"`
}

// parsedSpec is a validated ModelSpec.
type parsedSpec struct {
	Engine, Checkpoint, Task string
	Slots                    int
	Options                  string         // canonical JSON
	AdmissionTimeout         *time.Duration // nil: not given (the server default); 0: unbounded
	MaxQueue                 int
}

// parseSpec validates a spec. In legacy mode (parallel false) any slots
// field, even 1 or null, is refused: the single-session server has no slots.
func parseSpec(s *ModelSpec, parallel bool) (parsedSpec, error) {
	var p parsedSpec
	if s.Engine == "" {
		return p, Invalid("engine is required")
	}
	p.Engine, p.Checkpoint, p.Task = s.Engine, s.Checkpoint, s.Task
	p.Slots = 1
	if s.Slots != nil {
		if !parallel {
			return p, Invalid("slots needs --parallel-jobs: the legacy server runs one session per model")
		}
		if string(s.Slots) != "null" {
			var n int
			if err := json.Unmarshal(s.Slots, &n); err != nil {
				return p, Invalid("slots must be an integer 1..%d", core.MaxSlots)
			}
			if n < 1 || n > core.MaxSlots {
				return p, Invalid("slots must be 1..%d, got %d", core.MaxSlots, n)
			}
			p.Slots = n
		}
	}
	opts, err := runtime.CanonicalOptions(s.Options)
	if err != nil {
		return p, Invalid("%v", err)
	}
	p.Options = opts
	if s.AdmissionTimeoutMS != nil {
		if *s.AdmissionTimeoutMS < 0 {
			return p, Invalid("admission_timeout_ms must not be negative")
		}
		if *s.AdmissionTimeoutMS > maxTimeoutMS {
			return p, Invalid("admission_timeout_ms must be at most %d", maxTimeoutMS)
		}
		d := time.Duration(*s.AdmissionTimeoutMS) * time.Millisecond
		p.AdmissionTimeout = &d
	}
	if s.MaxQueue != nil {
		if *s.MaxQueue < 0 || *s.MaxQueue > core.MaxQueueLimit {
			return p, Invalid("max_queue must be 0..%d, got %d", core.MaxQueueLimit, *s.MaxQueue)
		}
		p.MaxQueue = *s.MaxQueue
	}
	return p, nil
}

// maxTimeoutMS bounds every admission timeout in milliseconds (one year,
// core.MaxTimeout), so that the scheduler's deadlines (now + timeout, in
// nanoseconds) cannot overflow (CONTRACT.md fail.spec-bounds). The memory
// estimate is bounded by core.Config.Validate (core.MaxMemoryMB), which the
// runtime applies to every spec, whatever its engine.
const maxTimeoutMS = core.MaxTimeout / int64(time.Millisecond)

// ToRuntime validates the spec for the server's mode (parallel: started
// with --parallel-jobs; without it any slots field is refused) and converts
// it into the runtime's ModelSpec, with the checkpoint resolved inside
// modelsRoot (see resolveCheckpoint). Errors are *Error values
// (400 invalid_request_error).
// An absent admission_timeout_ms means the server default
// (--admission-timeout); an explicit 0 means unbounded (still bounded by
// --admission-ceiling).
func (s *ModelSpec) ToRuntime(parallel bool, modelsRoot string) (runtime.ModelSpec, error) {
	p, err := parseSpec(s, parallel)
	if err != nil {
		return runtime.ModelSpec{}, err
	}
	cp, err := resolveCheckpoint(modelsRoot, p.Checkpoint)
	if err != nil {
		return runtime.ModelSpec{}, err
	}
	return runtime.ModelSpec{
		Engine: p.Engine, Checkpoint: cp, Task: p.Task, Slots: p.Slots, Options: json.RawMessage(p.Options),
		AdmissionTimeout: p.AdmissionTimeout, MaxQueue: p.MaxQueue,
	}, nil
}

// InferRequest is the body of POST /v1/models/{id}/infer.
type InferRequest struct {
	Input              json.RawMessage `json:"input"`
	Stream             bool            `json:"stream,omitempty"`
	AdmissionTimeoutMS *int64          `json:"admission_timeout_ms,omitempty"`
}

// parseInfer validates an inference request.
func parseInfer(req *InferRequest) error {
	if req.Input == nil {
		return Invalid("input is required")
	}
	if req.AdmissionTimeoutMS != nil && (*req.AdmissionTimeoutMS < 0 || *req.AdmissionTimeoutMS > maxTimeoutMS) {
		return Invalid("admission_timeout_ms must be 0..%d", maxTimeoutMS)
	}
	return nil
}

// BulkUnloadRequest is the body of POST /v1/models/unload.
type BulkUnloadRequest struct {
	Models []string `json:"models"`
}
