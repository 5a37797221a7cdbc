package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// ModelSpec is what PUT /v1/models/{id} registers or reconfigures: the
// engine, checkpoint, task, slot count, engine options and admission policy
// of one model.
type ModelSpec struct {
	Engine     string
	Checkpoint string
	Task       string
	// Slots is the number of parallel sessions, 1..core.MaxSlots; 0 means 1.
	Slots int
	// Options are the engine's options, a JSON object (nil or null: none).
	// They are stored in canonical form, so equal options compare equal.
	Options json.RawMessage
	// AdmissionTimeout is the model's admission wait: nil for the server
	// default (core.Options.DefaultAdmissionTimeout), 0 for unbounded, as
	// InferOptions.Timeout. The server ceiling bounds it.
	AdmissionTimeout *time.Duration
	// MaxQueue limits queued requests; 0 means unlimited.
	MaxQueue int
	// BaseVersion and RegisterOnly restore a model from a persistent
	// registry (core.Config.BaseVersion): when Apply registers an unknown
	// ID, it starts at config version BaseVersion (0: 1) and, with
	// RegisterOnly, stays unloaded. A reconfigure ignores both.
	BaseVersion  uint64
	RegisterOnly bool

	_ struct{}
}

// CanonicalOptions returns options in canonical JSON: an object with sorted
// keys and no insignificant space, numbers kept as written. Empty input and
// null give "{}". Anything but one JSON object is an error.
func CanonicalOptions(raw json.RawMessage) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "{}", nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("options: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("options: trailing data after the JSON object")
	}
	if _, ok := v.(map[string]any); !ok {
		return "", errors.New("options: must be a JSON object")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("options: %w", err)
	}
	return string(b), nil
}

// config validates spec completely, engine included, and converts it into
// the core's immutable Config. It runs before any live change (CONTRACT.md,
// "Invalid task/preset/spec/schema before live changes").
func (r *Runtime) config(id string, spec ModelSpec) (*core.Config, error) {
	slots := spec.Slots
	if slots == 0 {
		slots = 1
	}
	if slots < 1 || slots > core.MaxSlots {
		return nil, invalidf(nil, "model %q: slots must be 1..%d, got %d", id, core.MaxSlots, spec.Slots)
	}
	admission := core.NoTimeout // the server default
	if d := spec.AdmissionTimeout; d != nil {
		if *d < 0 {
			return nil, invalidf(nil, "model %q: admission timeout must not be negative", id)
		}
		admission = int64(*d)
	}
	if spec.MaxQueue < 0 {
		return nil, invalidf(nil, "model %q: max queue must not be negative", id)
	}
	opts, err := CanonicalOptions(spec.Options)
	if err != nil {
		return nil, invalidf(err, "model %q", id)
	}
	eng, err := r.engines.Get(spec.Engine)
	if err != nil {
		return nil, invalidf(err, "model %q", id)
	}
	bs := backends.Spec{Model: id, Task: spec.Task, Engine: spec.Engine, Checkpoint: spec.Checkpoint,
		Options: json.RawMessage(opts), Slots: slots}
	var mb int64
	err = protect(r.log, "validate", func() error {
		if err := eng.Validate(bs); err != nil {
			return err
		}
		var err error
		mb, err = eng.EstimateMB(bs)
		return err
	})
	if err != nil {
		if isPanic(err) {
			return nil, err
		}
		return nil, invalidf(err, "model %q: engine %s refused the spec", id, spec.Engine)
	}
	if mb < 0 {
		return nil, invalidf(nil, "model %q: engine %s estimated negative memory", id, spec.Engine)
	}
	cfg := &core.Config{Task: spec.Task, Engine: spec.Engine, Checkpoint: spec.Checkpoint, Options: opts,
		Slots: slots, AdmissionTimeout: admission, MaxQueue: spec.MaxQueue, MemoryMB: mb,
		BaseVersion: spec.BaseVersion, RegisterOnly: spec.RegisterOnly}
	if err := cfg.Validate(); err != nil {
		return nil, invalidf(err, "model %q", id)
	}
	return cfg, nil
}

// backendSpec is the engine's view of a committed config.
func backendSpec(id string, version uint64, c *core.Config) backends.Spec {
	return backends.Spec{Model: id, Version: version, Task: c.Task, Engine: c.Engine, Checkpoint: c.Checkpoint,
		Options: json.RawMessage(c.Options), Slots: c.Slots}
}
