package server

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/modelsroot"
)

// ModelSpec is the body of PUT /v1/models/{id} and an entry of the
// startup config file. It is only decoded here (strict JSON types); the
// runtime's validator (runtime.ModelSpec.Validate) checks every range, and
// its *runtime.SpecError names the field in these JSON names.
type ModelSpec struct {
	Engine     string `json:"engine"`
	Checkpoint string `json:"checkpoint"`
	Task       string `json:"task"`
	// Slots stays raw: the legacy server refuses the field whenever it is
	// given, even as null. Absent or null: 1.
	Slots   json.RawMessage `json:"slots,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
	// AdmissionTimeoutMS: absent (nil) for the server default
	// (--admission-timeout), 0 for unbounded (still bounded by
	// --admission-ceiling).
	AdmissionTimeoutMS *int64 `json:"admission_timeout_ms,omitempty"`
	// MaxQueue: 0 or absent for unlimited.
	MaxQueue int `json:"max_queue,omitempty"`
	// Aliases are other names requests may use for the model (OpenAI's
	// whisper-1, tts-1, ...; runtime.ModelSpec.Aliases). Absent: none.
	Aliases []string `json:"aliases,omitempty"`
}

// maxTimeoutMS bounds every admission timeout in milliseconds (one year,
// core.MaxTimeout), so that the scheduler's deadlines (now + timeout, in
// nanoseconds) cannot overflow (CONTRACT.md fail.spec-bounds). A spec's is
// checked by the runtime's validator; a request's here (parseInfer).
const maxTimeoutMS = runtime.MaxTimeoutMS

// msDuration converts milliseconds to a duration, saturating where the
// nanoseconds would overflow so that the validator still sees the value
// out of range.
func msDuration(ms int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > limit:
		return math.MaxInt64
	case ms < -limit:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// convert is the one place JSON's encodings become the runtime's (absent
// slots: 1; absent admission_timeout_ms: nil; milliseconds: a duration).
// It checks types only, and the server's mode: in legacy mode (parallel
// false) any slots field, even 1 or null, is refused, as the
// single-session server has no slots.
func (s *ModelSpec) convert(parallel bool) (runtime.ModelSpec, error) {
	out := runtime.ModelSpec{Engine: s.Engine, Checkpoint: s.Checkpoint, Task: s.Task, Slots: 1,
		Options: s.Options, MaxQueue: s.MaxQueue, Aliases: s.Aliases}
	if s.Slots != nil {
		if !parallel {
			return out, InvalidParam(runtime.FieldSlots, "slots needs --parallel-jobs: the legacy server runs one session per model")
		}
		if string(s.Slots) != "null" {
			if err := json.Unmarshal(s.Slots, &out.Slots); err != nil {
				return out, InvalidParam(runtime.FieldSlots, "slots must be an integer 1..%d", core.MaxSlots)
			}
		}
	}
	if ms := s.AdmissionTimeoutMS; ms != nil {
		d := msDuration(*ms)
		out.AdmissionTimeout = &d
	}
	return out, nil
}

// specJSON converts a runtime spec back into JSON's encodings (the inverse
// of toRuntime): nil admission timeout and 0 max queue are left out,
// slots too in the legacy mode.
func specJSON(s *runtime.ModelSpec, parallel bool) ModelSpec {
	out := ModelSpec{Engine: s.Engine, Checkpoint: s.Checkpoint, Task: s.Task, Options: s.Options, MaxQueue: s.MaxQueue,
		Aliases: s.Aliases}
	if parallel {
		out.Slots = json.RawMessage(strconv.Itoa(s.Slots))
	}
	if d := s.AdmissionTimeout; d != nil {
		ms := int64(*d / time.Millisecond)
		out.AdmissionTimeoutMS = &ms
	}
	return out
}

// ToRuntime converts the decoded spec for the server's mode (parallel:
// started with --parallel-jobs; without it any slots field is refused)
// into the runtime's ModelSpec, with the checkpoint resolved inside
// modelsRoot (see modelsroot.Resolve). It checks JSON types only: the
// ranges are the runtime's validator's, which Apply runs once, before
// anything live changes (its *runtime.SpecError names the field, which the
// answer's param carries). Errors are *Error values (400
// invalid_request_error).
func (s *ModelSpec) ToRuntime(parallel bool, modelsRoot string) (runtime.ModelSpec, error) {
	spec, err := s.convert(parallel)
	if err != nil {
		return runtime.ModelSpec{}, err
	}
	if spec.Checkpoint, err = modelsroot.Resolve(modelsRoot, spec.Checkpoint); err != nil {
		return runtime.ModelSpec{}, err
	}
	return spec, nil
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
		return InvalidParam("input", "input is required")
	}
	if req.AdmissionTimeoutMS != nil && (*req.AdmissionTimeoutMS < 0 || *req.AdmissionTimeoutMS > maxTimeoutMS) {
		return InvalidParam("admission_timeout_ms", "admission_timeout_ms must be 0..%d", maxTimeoutMS)
	}
	return nil
}

// BulkUnloadRequest is the body of POST /v1/models/unload.
type BulkUnloadRequest struct {
	Models []string `json:"models"`
}
