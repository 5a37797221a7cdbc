package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/modelspec"
	"github.com/sluice-dev/sluice/server/internal/registry"
)

// One validator, every entry point (CONTRACT.md fail.spec-bounds): every
// field's bounds (below, at, above) through the spec's decoding and the
// runtime's validator alone, PUT /v1/models/{id} and the startup config
// file give the same answer, the same message and the same field, and the
// state dir's restore the same field. (The OIP v2 repository load takes no
// spec.)
func TestSpecBoundsEveryEntry(t *testing.T) {
	cases := []struct {
		name, fields string // JSON members beside "engine" (or instead of it)
		field        string // "" for accepted
		engine       bool   // only the engine can tell (not refused by decoding)
	}{
		{"engine empty", `"engine":""`, runtime.FieldEngine, false},
		{"engine unknown", `"engine":"nope"`, runtime.FieldEngine, true},
		{"slots 0", `"slots":0`, runtime.FieldSlots, false},
		{"slots 1", `"slots":1`, "", false},
		{"slots null", `"slots":null`, "", false},
		{"slots 16", `"slots":16`, "", false},
		{"slots 17", `"slots":17`, runtime.FieldSlots, false},
		{"options array", `"options":[1]`, runtime.FieldOptions, false},
		{"options refused", `"options":{"bogus":1}`, runtime.FieldEngine, true},
		{"memory at bound", fmt.Sprintf(`"options":{"memory_mb":%d}`, core.MaxMemoryMB), "", false},
		{"memory above", fmt.Sprintf(`"options":{"memory_mb":%d}`, core.MaxMemoryMB+1), runtime.FieldOptions, true},
		{"admission -1", `"admission_timeout_ms":-1`, runtime.FieldAdmissionTimeout, false},
		{"admission 0", `"admission_timeout_ms":0`, "", false},
		{"admission max", fmt.Sprintf(`"admission_timeout_ms":%d`, runtime.MaxTimeoutMS), "", false},
		{"admission max+1", fmt.Sprintf(`"admission_timeout_ms":%d`, runtime.MaxTimeoutMS+1), runtime.FieldAdmissionTimeout, false},
		{"admission overflows ns", `"admission_timeout_ms":9223372036854775807`, runtime.FieldAdmissionTimeout, false},
		{"admission -overflow", `"admission_timeout_ms":-9223372036854775808`, runtime.FieldAdmissionTimeout, false},
		{"max queue -1", `"max_queue":-1`, runtime.FieldMaxQueue, false},
		{"max queue 0", `"max_queue":0`, "", false},
		{"max queue max", fmt.Sprintf(`"max_queue":%d`, core.MaxQueueLimit), "", false},
		{"max queue max+1", fmt.Sprintf(`"max_queue":%d`, core.MaxQueueLimit+1), runtime.FieldMaxQueue, false},
	}
	put := newServer(t, nil)
	boot := newServer(t, nil)
	for i, c := range cases {
		id := fmt.Sprintf("m%d", i)
		body := `{"engine":"fixture",` + c.fields + `}`
		if strings.HasPrefix(c.fields, `"engine"`) {
			body = `{` + c.fields + `}`
		}

		// The decoding and the validator alone.
		var ms ModelSpec
		if err := DecodeModelSpec([]byte(body), &ms); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err := toRuntime(&ms, true)
		if want := c.field; c.engine && specFieldOf(err) != "" || !c.engine && specFieldOf(err) != want {
			t.Errorf("%s: toRuntime names %q (%v), want %q", c.name, specFieldOf(err), err, want)
		}

		// The startup config file: YAML, of which JSON is a part.
		entries, err := ParseModelsYAML([]byte(`{"models":[{"id":"` + id + `",` + body[1:] + `]}`))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bootErr := boot.s.RegisterModels(ctxLimit(t), entries)
		if got := specFieldOf(bootErr); got != c.field {
			t.Errorf("%s: startup file names %q (%v), want %q", c.name, got, bootErr, c.field)
		}

		// The state dir: the same spec in core's encoding, restored at start.
		rs, err := ms.Convert(true)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := specFieldOf(restoreSpec(t, id, 1, &rs)); got != c.field {
			t.Errorf("%s: the state dir names %q, want %q", c.name, got, c.field)
		}

		// PUT /v1/models/{id}: the same message.
		if c.field == "" {
			put.must(200, "PUT", "/v1/models/"+id, body)
			continue
		}
		var e struct {
			Error struct{ Message, Type string }
		}
		put.must(400, "PUT", "/v1/models/"+id, body).json(t, &e)
		var se *runtime.SpecError
		if !errors.As(bootErr, &se) || e.Error.Type != "invalid_request_error" || !strings.HasSuffix(e.Error.Message, se.Reason) ||
			!strings.Contains(e.Error.Message, c.field) {
			t.Errorf("%s: PUT answers %+v; the startup file %v", c.name, e.Error, bootErr)
		}
	}
	// The state dir's own field.
	valid := runtime.ModelSpec{Engine: "fixture", Slots: 1}
	for v, want := range map[uint64]string{1: "", core.MaxBaseVersion: "", core.MaxBaseVersion + 1: runtime.FieldConfigVersion} {
		if got := specFieldOf(restoreSpec(t, "v", v, &valid)); got != want {
			t.Errorf("config_version %d: the state dir names %q, want %q", v, got, want)
		}
	}
	if err := restoreSpec(t, "v", 0, &valid); err == nil || !strings.Contains(err.Error(), "config_version must be at least 1") {
		t.Errorf("config_version 0: %v", err)
	}
	for _, ts := range []*tserver{put, boot} {
		if n := ts.s.Runtime().Disagreements(); n != 0 {
			t.Fatalf("%d disagreements", n)
		}
	}
}

// restoreSpec starts a server on a state dir that records spec as model
// id's committed config, and returns its error.
func restoreSpec(t *testing.T, id string, version uint64, spec *runtime.ModelSpec) error {
	ns := core.NoTimeout
	if d := spec.AdmissionTimeout; d != nil {
		ns = int64(*d)
	}
	rs := newRestartable(t)
	b, err := registry.EncodeSnapshot(registry.State{Models: []registry.Model{{ID: id, ConfigVersion: version, Engine: spec.Engine,
		Checkpoint: spec.Checkpoint, Task: spec.Task, Options: spec.Options, Slots: spec.Slots, AdmissionTimeoutNS: ns,
		MaxQueue: spec.MaxQueue}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(rs.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rs.dir, "registry.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return rs.startErr()
}

func specFieldOf(err error) string {
	var se *runtime.SpecError
	if errors.As(err, &se) {
		return se.Field
	}
	if err != nil {
		return "(not a SpecError)"
	}
	return ""
}

// The spec a GET returns converts back to the same runtime spec.
func TestSpecJSONRoundTrip(t *testing.T) {
	for _, body := range []string{`{"engine":"fixture","slots":3}`, `{"engine":"fixture","admission_timeout_ms":0,"max_queue":5}`,
		`{"engine":"fixture","admission_timeout_ms":1500,"options":{"a":1}}`} {
		var ms ModelSpec
		if err := DecodeModelSpec([]byte(body), &ms); err != nil {
			t.Fatal(err)
		}
		rs, err := toRuntime(&ms, true)
		if err != nil {
			t.Fatal(err)
		}
		back := modelspec.JSON(&rs, true)
		b1, _ := json.Marshal(ms)
		b2, _ := json.Marshal(back)
		again, err := toRuntime(&back, true)
		if err != nil || again.Slots != rs.Slots || again.MaxQueue != rs.MaxQueue ||
			(again.AdmissionTimeout == nil) != (rs.AdmissionTimeout == nil) || rs.AdmissionTimeout != nil && *again.AdmissionTimeout != *rs.AdmissionTimeout {
			t.Errorf("%s -> %s -> %s: %v", b1, b2, fmt.Sprint(again), err)
		}
	}
}

// toRuntime is what PUT /v1/models/{id} checks of a spec, without the
// runtime: the JSON conversion (convert), then the runtime's validator,
// which Apply runs once.
func toRuntime(s *ModelSpec, parallel bool) (runtime.ModelSpec, error) {
	out, err := s.Convert(parallel)
	if err == nil {
		err = out.Validate()
	}
	return out, err
}
