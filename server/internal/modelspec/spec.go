// Package modelspec is a model spec's JSON: the body of PUT
// /v1/models/{id}, an entry of the startup config file (--config) and the
// answer of GET /v1/models/{id}/spec. It decodes and converts only (JSON
// types, the server's mode, the checkpoint confined to the models root);
// every range is the runtime's validator's (runtime.ModelSpec.Validate,
// run once, by Apply), whose *runtime.SpecError names the field in these
// JSON names.
package modelspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/modelsroot"
)

// Spec is the body of PUT /v1/models/{id} and an entry of the startup
// config file. It is only decoded here (strict JSON types); the runtime's
// validator (runtime.ModelSpec.Validate) checks every range, and its
// *runtime.SpecError names the field in these JSON names.
type Spec struct {
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
	// VoiceMap maps OpenAI's stock voice names to voices of a speech
	// model (runtime.ModelSpec.VoiceMap). Absent: each means the
	// model's default voice.
	VoiceMap map[string]string `json:"voice_map,omitempty"`
}

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

// Convert is the one place JSON's encodings become the runtime's (absent
// slots: 1; absent admission_timeout_ms: nil; milliseconds: a duration).
// It checks types only, and the server's mode: in legacy mode (parallel
// false) any slots field, even 1 or null, is refused, as the
// single-session server has no slots.
func (s *Spec) Convert(parallel bool) (runtime.ModelSpec, error) {
	out := runtime.ModelSpec{Engine: s.Engine, Checkpoint: s.Checkpoint, Task: s.Task, Slots: 1,
		Options: s.Options, MaxQueue: s.MaxQueue, Aliases: s.Aliases, VoiceMap: s.VoiceMap}
	if s.Slots != nil {
		if !parallel {
			return out, httpapi.InvalidParam(runtime.FieldSlots, "slots needs --parallel-jobs: the legacy server runs one session per model")
		}
		if string(s.Slots) != "null" {
			if err := json.Unmarshal(s.Slots, &out.Slots); err != nil {
				return out, httpapi.InvalidParam(runtime.FieldSlots, "slots must be an integer 1..%d", core.MaxSlots)
			}
		}
	}
	if ms := s.AdmissionTimeoutMS; ms != nil {
		d := msDuration(*ms)
		out.AdmissionTimeout = &d
	}
	return out, nil
}

// JSON converts a runtime spec back into JSON's encodings (the inverse
// of Convert): nil admission timeout and 0 max queue are left out,
// slots too in the legacy mode.
func JSON(s *runtime.ModelSpec, parallel bool) Spec {
	out := Spec{Engine: s.Engine, Checkpoint: s.Checkpoint, Task: s.Task, Options: s.Options, MaxQueue: s.MaxQueue,
		Aliases: s.Aliases, VoiceMap: s.VoiceMap}
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
// answer's param carries). Errors are *httpapi.Error values (400
// invalid_request_error).
func (s *Spec) ToRuntime(parallel bool, modelsRoot string) (runtime.ModelSpec, error) {
	spec, err := s.Convert(parallel)
	if err != nil {
		return runtime.ModelSpec{}, err
	}
	if spec.Checkpoint, err = modelsroot.Resolve(modelsRoot, spec.Checkpoint); err != nil {
		return runtime.ModelSpec{}, err
	}
	return spec, nil
}

// Of converts a committed config back into a spec in the shape PUT
// /v1/models/{id} takes, the checkpoint relative to root where it lies
// inside it (modelsroot.Rel).
func Of(c *core.Config, parallel bool, root string) Spec {
	spec := runtime.SpecOf(c)
	spec.Checkpoint = modelsroot.Rel(root, spec.Checkpoint)
	return JSON(&spec, parallel)
}

// Entry is one model of the startup config file.
type Entry struct {
	ID   string
	Spec Spec
}

// fileConfig is the YAML of --config FILE:
//
//	models:
//	  - id: tts
//	    engine: fixture
//	    slots: 2
//	    options: {load_ms: 50}
type fileConfig struct {
	Models []map[string]any `yaml:"models"`
}

// LoadFile reads the models to register at start from a YAML file.
func LoadFile(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseYAML(b)
}

// ParseYAML parses the YAML of a models file; each entry is a model
// spec (the JSON body of PUT /v1/models/{id}) plus its id, decoded strictly.
func ParseYAML(b []byte) ([]Entry, error) {
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) { // an empty file lists no models
		return nil, fmt.Errorf("config: %w", err)
	}
	var out []Entry
	seen := map[string]bool{}
	for k, m := range fc.Models {
		id, _ := m["id"].(string)
		if err := httpapi.ValidModelID(id); err != nil {
			return nil, fmt.Errorf("config: model %d: %w", k, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("config: model %q listed twice", id)
		}
		seen[id] = true
		delete(m, "id")
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("config: model %q: %w", id, err)
		}
		var spec Spec
		if err := httpapi.DecodeJSON(raw, &spec); err != nil {
			return nil, fmt.Errorf("config: model %q: %w", id, err)
		}
		out = append(out, Entry{ID: id, Spec: spec})
	}
	return out, nil
}
