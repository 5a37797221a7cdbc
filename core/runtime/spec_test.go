package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

// specBound is one row of the validator's bounds table: a spec one field
// away from the base, and the field the validator names when it refuses
// it ("" for accepted).
type specBound struct {
	name  string
	edit  func(*ModelSpec)
	field string
}

// specBounds goes below, at and above every bound of a spec (CONTRACT.md
// fail.spec-bounds).
func specBounds() []specBound {
	return []specBound{
		{"engine empty", func(s *ModelSpec) { s.Engine = "" }, FieldEngine},
		{"engine unknown", func(s *ModelSpec) { s.Engine = "nope" }, FieldEngine},
		{"slots 0", func(s *ModelSpec) { s.Slots = 0 }, FieldSlots},
		{"slots 1", func(s *ModelSpec) { s.Slots = 1 }, ""},
		{"slots 16", func(s *ModelSpec) { s.Slots = core.MaxSlots }, ""},
		{"slots 17", func(s *ModelSpec) { s.Slots = core.MaxSlots + 1 }, FieldSlots},
		{"options array", func(s *ModelSpec) { s.Options = []byte(`[1]`) }, FieldOptions},
		{"options null", func(s *ModelSpec) { s.Options = []byte(`null`) }, ""},
		{"engine refuses options", func(s *ModelSpec) { s.Options = []byte(`{"bogus":1}`) }, FieldEngine},
		{"memory at bound", func(s *ModelSpec) { s.Options = []byte(fmt.Sprintf(`{"memory_mb":%d}`, core.MaxMemoryMB)) }, ""},
		{"memory above", func(s *ModelSpec) { s.Options = []byte(fmt.Sprintf(`{"memory_mb":%d}`, core.MaxMemoryMB+1)) }, FieldOptions},
		{"admission unset", func(s *ModelSpec) { s.AdmissionTimeout = nil }, ""},
		{"admission -1ns", func(s *ModelSpec) { s.AdmissionTimeout = dur(-1) }, FieldAdmissionTimeout},
		{"admission 0", func(s *ModelSpec) { s.AdmissionTimeout = dur(0) }, ""},
		{"admission max", func(s *ModelSpec) { s.AdmissionTimeout = dur(time.Duration(core.MaxTimeout)) }, ""},
		{"admission max+1ns", func(s *ModelSpec) { s.AdmissionTimeout = dur(time.Duration(core.MaxTimeout) + 1) }, FieldAdmissionTimeout},
		{"max queue -1", func(s *ModelSpec) { s.MaxQueue = -1 }, FieldMaxQueue},
		{"max queue 0", func(s *ModelSpec) { s.MaxQueue = 0 }, ""},
		{"max queue max", func(s *ModelSpec) { s.MaxQueue = core.MaxQueueLimit }, ""},
		{"max queue max+1", func(s *ModelSpec) { s.MaxQueue = core.MaxQueueLimit + 1 }, FieldMaxQueue},
		{"config version max", func(s *ModelSpec) { s.BaseVersion, s.RegisterOnly = core.MaxBaseVersion, true }, ""},
		{"config version max+1", func(s *ModelSpec) { s.BaseVersion, s.RegisterOnly = core.MaxBaseVersion+1, true }, FieldConfigVersion},
	}
}

func specField(err error) string {
	var se *SpecError
	if errors.As(err, &se) {
		return se.Field
	}
	if err != nil {
		return "(not a SpecError: " + err.Error() + ")"
	}
	return ""
}

// The validator's answer and field name for every bound, through
// ModelSpec.Validate (fields only) and Runtime.Apply (engine included);
// whatever it refuses that core's guard can see, core.Config.Validate
// refuses too, and whatever it accepts the guard accepts.
func TestSpecBounds(t *testing.T) {
	e := newEnv(t, core.Options{})
	for i, c := range specBounds() {
		s := spec(2, `{}`)
		c.edit(&s)
		engineField := c.field == FieldOptions && strings.HasPrefix(c.name, "memory") ||
			c.field == FieldEngine && c.name != "engine empty"
		got := specField(s.Validate())
		if engineField {
			if got != "" {
				t.Errorf("%s: Validate refused %s, which only the engine can tell", c.name, got)
			}
		} else if got != c.field {
			t.Errorf("%s: Validate names %q, want %q", c.name, got, c.field)
		}
		_, err := e.rt.Apply(bg, fmt.Sprintf("m%d", i), s)
		if got := specField(err); got != c.field {
			t.Errorf("%s: Apply names %q, want %q", c.name, got, c.field)
		}
		if c.field != "" && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v is not invalid", c.name, err)
		}
		if engineField || c.field == FieldOptions {
			continue // the guard sees only core's encoding: canonical options, an estimate
		}
		guard := s.coreConfig("{}", 0).Validate()
		if c.name == "admission -1ns" {
			continue // core's encoding reads -1 as NoTimeout: why the runtime's unset is nil
		}
		if c.field == FieldSlots || c.field == FieldAdmissionTimeout || c.field == FieldMaxQueue || c.field == FieldConfigVersion {
			if guard == nil {
				t.Errorf("%s: core's guard accepts what the validator refuses", c.name)
			}
		} else if guard != nil {
			t.Errorf("%s: core's guard refuses what the validator accepts: %v", c.name, guard)
		}
	}
	if n := e.rt.Disagreements(); n != 0 {
		t.Fatalf("%d disagreements", n)
	}
}

// A spec core's guard refuses is refused by the validator first: with the
// field checks skipped (the only way to build one), the guard's refusal is
// a disagreement, which panics with both values under CheckInvariants and
// otherwise is counted, logged and still refused.
func TestSpecDisagreement(t *testing.T) {
	skip := func(s *ModelSpec) (string, error) { return "{}", nil }
	s := spec(1, `{}`)
	s.MaxQueue = core.MaxQueueLimit + 1
	if specField(s.Validate()) != FieldMaxQueue {
		t.Fatal("the validator accepts the planted spec")
	}

	e := newEnv(t, core.Options{})
	func() {
		defer func() {
			msg := fmt.Sprint(recover())
			if !strings.Contains(msg, "MaxQueue:1048577") || !strings.Contains(msg, "max queue must be 0..1048576") {
				t.Errorf("panic without both values: %q", msg)
			}
		}()
		_, _ = e.rt.configWith("a", s, skip)
	}()

	p := newEnv(t, core.Options{}, withoutChecks())
	cfg, err := p.rt.configWith("a", s, skip)
	if cfg != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "max queue must be") {
		t.Fatalf("production disagreement: %+v %v", cfg, err)
	}
	if n := p.rt.Disagreements(); n != 1 {
		t.Fatalf("Disagreements %d, want 1", n)
	}
}

// SpecOf is the inverse of the conversion into core's encoding.
func TestSpecOfRoundTrip(t *testing.T) {
	for _, d := range []*time.Duration{nil, dur(0), dur(time.Second)} {
		s := spec(3, `{"a":1}`)
		s.AdmissionTimeout, s.MaxQueue = d, 7
		back := SpecOf(s.coreConfig(`{"a":1}`, 5))
		if back.Slots != 3 || back.MaxQueue != 7 || string(back.Options) != `{"a":1}` || (d == nil) != (back.AdmissionTimeout == nil) ||
			d != nil && *d != *back.AdmissionTimeout || back.Validate() != nil {
			t.Errorf("%v: %+v", d, back)
		}
	}
}

// checkCounter counts the fixture's spec checks: a registration resolves
// an engine's options once (Check), never once to validate and again to
// estimate.
type checkCounter struct {
	backends.Engine
	checks, validates atomic.Int32
}

func (c *checkCounter) Check(s backends.Spec) (int64, error) {
	c.checks.Add(1)
	return c.Engine.Check(s)
}

func (c *checkCounter) Validate(s backends.Spec) error {
	c.validates.Add(1)
	return c.Engine.Validate(s)
}

// One registration, one reconfigure, one refused spec: one Check each,
// no Validate (the engine resolves its options once per registration).
func TestEngineCheckedOncePerApply(t *testing.T) {
	cc := &checkCounter{Engine: fixture.New()}
	e := newEnv(t, core.Options{}, withEngine("counted", cc))
	s := spec(1, `{"memory_mb":7}`)
	s.Engine = "counted"
	e.apply("a", s)
	s.Slots = 2
	e.apply("a", s)
	s.Options = json.RawMessage(`{"bogus":1}`)
	if _, err := e.rt.Apply(context.Background(), "a", s); err == nil {
		t.Fatal("an unknown option was accepted")
	}
	if c, v := cc.checks.Load(), cc.validates.Load(); c != 3 || v != 0 {
		t.Fatalf("%d Check and %d Validate calls for 3 applies, want 3 and 0", c, v)
	}
}
