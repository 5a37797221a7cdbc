package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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
	// Slots is the number of parallel sessions, 1..core.MaxSlots (not
	// optional past the server's JSON, whose absent slots mean 1).
	Slots int
	// Options are the engine's options, a JSON object (nil or null: none).
	// They are stored in canonical form, so equal options compare equal.
	Options json.RawMessage
	// AdmissionTimeout is the model's admission wait, 0..core.MaxTimeout:
	// nil for the server default (core.Options.DefaultAdmissionTimeout), 0
	// for unbounded, as InferOptions.Timeout. The server ceiling bounds it.
	AdmissionTimeout *time.Duration
	// MaxQueue limits queued requests, 0..core.MaxQueueLimit; 0 means
	// unlimited.
	MaxQueue int
	// Aliases are other names of the model that requests may use instead
	// of its ID (OpenAI's whisper-1, tts-1, ...): at most MaxAliases, each
	// a valid model ID, none the model's own ID, another model's ID or
	// another model's alias (names.go). Their order does not matter.
	Aliases []string
	// VoiceMap maps OpenAI's stock voice names (alloy, ash, ...) to voices
	// of a speech model, which requests naming them then get; a stock
	// name it does not map means the model's default voice. Each key a
	// stock name, each value a voice the engine lists for the checkpoint
	// (CanonicalVoiceMap, checkVoiceMap). Nil: none.
	VoiceMap map[string]string
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

// The fields of a spec as a SpecError names them: the wire names of PUT
// /v1/models/{id} and the startup config file (config_version is the
// state dir's), which ModelSpec's Go fields mirror, so every caller reads
// the same name.
const (
	FieldEngine           = "engine"
	FieldSlots            = "slots"
	FieldOptions          = "options" // also the engine's memory estimate, which the options set
	FieldAdmissionTimeout = "admission_timeout_ms"
	FieldMaxQueue         = "max_queue"
	FieldConfigVersion    = "config_version"
	FieldAliases          = "aliases"
)

// MaxAliases bounds a model's aliases.
const MaxAliases = 16

// MaxTimeoutMS is core.MaxTimeout in milliseconds, the unit of
// admission_timeout_ms.
const MaxTimeoutMS = core.MaxTimeout / int64(time.Millisecond)

// SpecError is a spec the validator refused: Field (one of the Field
// constants) and Reason, the whole message, which names the field
// ("slots must be 1..16, got 17").
type SpecError struct {
	Field  string
	Reason string
	Err    error
}

func (e *SpecError) Error() string { return e.Reason }

// Unwrap returns the cause (the options' JSON error, the engine's refusal).
func (e *SpecError) Unwrap() error { return e.Err }

func specErrorf(field string, err error, format string, args ...any) *SpecError {
	return &SpecError{Field: field, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Validate is the one validator of a spec's fields, for every caller (the
// server's PUT, its startup config file, its state dir, the Go API): it
// checks each field's range in the order engine, slots, options,
// admission timeout, max queue, config version, and returns the first
// refusal as a *SpecError. What it accepts, core.Config.Validate accepts
// (the machine's own guard, checked again in Runtime.config). The engine's
// part (does it exist, does it take the spec, its memory estimate) needs
// the runtime: Prepare (and Apply, which prepares) runs both, once.
func (s *ModelSpec) Validate() error {
	_, err := checkFields(s)
	return err
}

// checkFields is Validate, returning the canonical options.
func checkFields(s *ModelSpec) (string, error) {
	if _, err := CanonicalAliases(s.Aliases); err != nil {
		return "", err
	}
	if _, err := CanonicalVoiceMap(s.VoiceMap); err != nil {
		return "", err
	}
	if s.Engine == "" {
		return "", specErrorf(FieldEngine, nil, "engine is required")
	}
	if s.Slots < 1 || s.Slots > core.MaxSlots {
		return "", specErrorf(FieldSlots, nil, "slots must be 1..%d, got %d", core.MaxSlots, s.Slots)
	}
	opts, err := CanonicalOptions(s.Options)
	if err != nil {
		return "", specErrorf(FieldOptions, err, "%v", err)
	}
	if d := s.AdmissionTimeout; d != nil {
		if *d < 0 {
			return "", specErrorf(FieldAdmissionTimeout, nil, "admission_timeout_ms must not be negative")
		}
		if int64(*d) > core.MaxTimeout {
			return "", specErrorf(FieldAdmissionTimeout, nil, "admission_timeout_ms must be at most %d", MaxTimeoutMS)
		}
	}
	if s.MaxQueue < 0 || s.MaxQueue > core.MaxQueueLimit {
		return "", specErrorf(FieldMaxQueue, nil, "max_queue must be 0..%d, got %d", core.MaxQueueLimit, s.MaxQueue)
	}
	if s.BaseVersion > core.MaxBaseVersion {
		return "", specErrorf(FieldConfigVersion, nil, "config_version must be at most %d, got %d", uint64(core.MaxBaseVersion), s.BaseVersion)
	}
	return opts, nil
}

// ValidName reports whether s is a valid model ID or alias:
// [A-Za-z0-9._-]{1,128}, not "." or "..".
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CanonicalAliases checks a spec's aliases (at most MaxAliases valid
// names, none twice) and returns them in core.Config's form: sorted,
// comma-separated ("" for none). A refusal is a *SpecError naming aliases.
func CanonicalAliases(aliases []string) (string, error) {
	if len(aliases) > MaxAliases {
		return "", specErrorf(FieldAliases, nil, "aliases: at most %d, got %d", MaxAliases, len(aliases))
	}
	sorted := slices.Clone(aliases)
	slices.Sort(sorted)
	for i, a := range sorted {
		if !ValidName(a) {
			return "", specErrorf(FieldAliases, nil, "aliases: %.140q must match [A-Za-z0-9._-]{1,128} (a model ID)", a)
		}
		if i > 0 && sorted[i-1] == a {
			return "", specErrorf(FieldAliases, nil, "aliases: %q is listed twice", a)
		}
	}
	return strings.Join(sorted, ","), nil
}

// splitAliases is CanonicalAliases's inverse (nil for none).
func splitAliases(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// checkMemory bounds the engine's estimate of the pool's memory.
func checkMemory(engine string, mb int64) error {
	if mb < 0 || mb > core.MaxMemoryMB {
		return specErrorf(FieldOptions, nil, "options: engine %s estimates %d MB of memory for the pool, outside 0..%d", engine, mb, core.MaxMemoryMB)
	}
	return nil
}

// config validates spec completely, engine included, and converts it into
// the core's immutable Config. It runs before any live change (CONTRACT.md,
// "Invalid task/preset/spec/schema before live changes").
func (r *Runtime) config(id string, spec ModelSpec) (*core.Config, error) {
	return r.configWith(id, spec, checkFields)
}

// configWith is config with its field checks given: tests pass a weaker
// one to build a spec the core's guard refuses.
func (r *Runtime) configWith(id string, spec ModelSpec, check func(*ModelSpec) (string, error)) (*core.Config, error) {
	opts, err := check(&spec)
	if err != nil {
		return nil, invalidf(err, "model %q", id)
	}
	if slices.Contains(spec.Aliases, id) {
		return nil, invalidf(specErrorf(FieldAliases, nil, "aliases: %q is the model's own ID", id), "model %q", id)
	}
	eng, err := r.engines.Get(spec.Engine)
	if err != nil {
		return nil, invalidf(specErrorf(FieldEngine, err, "%v", err), "model %q", id)
	}
	bs := backends.Spec{Model: id, Task: spec.Task, Engine: spec.Engine, Checkpoint: spec.Checkpoint,
		Options: json.RawMessage(opts), Slots: spec.Slots}
	var mb int64
	var vmErr error // the voice map's refusal names voice_map, not engine
	err = protect(r.log, "validate", func() error {
		var err error
		if mb, err = eng.Check(bs); err != nil { // one resolve of the options: validation and estimate
			return err
		}
		vmErr = checkVoiceMap(eng, bs, spec.VoiceMap)
		return nil
	})
	if err != nil {
		if isPanic(err) {
			return nil, err
		}
		return nil, invalidf(specErrorf(FieldEngine, err, "engine %s refused the spec: %v", spec.Engine, err), "model %q", id)
	}
	if vmErr != nil {
		return nil, invalidf(vmErr, "model %q", id)
	}
	if err := checkMemory(spec.Engine, mb); err != nil {
		return nil, invalidf(err, "model %q", id)
	}
	cfg := spec.coreConfig(opts, mb)
	cfg.Aliases, _ = CanonicalAliases(spec.Aliases)    // checked above
	cfg.VoiceMap, _ = CanonicalVoiceMap(spec.VoiceMap) // checked above
	if err := cfg.Validate(); err != nil {
		return nil, r.specDisagrees(id, cfg, err)
	}
	return cfg, nil
}

// specDisagrees reports a config the validator accepted and core's guard
// refused: a bug in one of them. Under CheckInvariants (tests) it panics
// with both; in production it is a loud error, counted (Disagreements),
// and the spec is refused.
func (r *Runtime) specDisagrees(id string, cfg *core.Config, guard error) error {
	r.disagreements.Add(1)
	msg := fmt.Sprintf("runtime: model %q: the spec validator accepted %+v, core.Config.Validate refuses it: %v", id, *cfg, guard)
	if r.checkInv {
		panic(msg)
	}
	r.log.Error(msg)
	return invalidf(guard, "model %q: spec refused by the core's guard after the validator accepted it (a bug)", id)
}

// coreConfig converts a validated spec into core's encoding: the one place
// an optional field's runtime encoding becomes core's (nil admission
// timeout: core.NoTimeout).
func (s *ModelSpec) coreConfig(opts string, mb int64) *core.Config {
	admission := core.NoTimeout
	if d := s.AdmissionTimeout; d != nil {
		admission = int64(*d)
	}
	return &core.Config{Task: s.Task, Engine: s.Engine, Checkpoint: s.Checkpoint, Options: opts,
		Slots: s.Slots, AdmissionTimeout: admission, MaxQueue: s.MaxQueue, MemoryMB: mb,
		BaseVersion: s.BaseVersion, RegisterOnly: s.RegisterOnly}
}

// SpecOf converts a committed config back into a spec (without the
// registration-only BaseVersion and RegisterOnly): the one place core's
// encoding becomes the runtime's (core.NoTimeout: a nil admission
// timeout). SpecOf(c) passes Validate whenever c passes core.Config.Validate
// (its memory estimate aside, which the engine makes again).
func SpecOf(c *core.Config) ModelSpec {
	s := ModelSpec{Engine: c.Engine, Checkpoint: c.Checkpoint, Task: c.Task, Slots: c.Slots,
		Options: json.RawMessage(c.Options), MaxQueue: c.MaxQueue, Aliases: splitAliases(c.Aliases), VoiceMap: VoiceMapOf(c)}
	if c.AdmissionTimeout != core.NoTimeout {
		d := time.Duration(c.AdmissionTimeout)
		s.AdmissionTimeout = &d
	}
	return s
}

// backendSpec is the engine's view of a committed config.
func backendSpec(id string, version uint64, c *core.Config) backends.Spec {
	return backends.Spec{Model: id, Version: version, Task: c.Task, Engine: c.Engine, Checkpoint: c.Checkpoint,
		Options: json.RawMessage(c.Options), Slots: c.Slots}
}
