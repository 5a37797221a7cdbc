package server

import (
	"encoding/json"
	"testing"
)

// Every 400 carries a code, and the field at fault where one is known is
// its param: the spec validator's field (runtime.SpecError.Field), the
// strict decoder's key, a handler's own field (CONTRACT.md err.shape).
func TestEvery400NamesItsFieldAndCode(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("m", `{"engine":"fixture"}`)
	for _, c := range []struct {
		method, path, body string
		param, code        string
	}{
		{"PUT", "/v1/models/a", `{"engine":"fixture","slots":17}`, "slots", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","slots":0}`, "slots", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","slots":"2"}`, "slots", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"nope"}`, "engine", "invalid_request"},
		{"PUT", "/v1/models/a", `{"slots":1}`, "engine", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","max_queue":-1}`, "max_queue", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","admission_timeout_ms":-1}`, "admission_timeout_ms", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","options":[1]}`, "options", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","checkpoint":"../x"}`, "checkpoint", "invalid_request"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","options":{"load_ms":1,"load_ms":2}}`, "options.load_ms", "duplicate_key"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","Slots":1}`, "Slots", "misspelled_key"},
		{"PUT", "/v1/models/a", `{"engine":"fixture","colour":1}`, "colour", "unknown_parameter"},
		{"PUT", "/v1/models/a", `{"engine":1}`, "engine", "invalid_type"},
		{"PUT", "/v1/models/a", `{"engine":`, "", "invalid_json"},
		{"PUT", "/v1/models/a", ``, "", "empty_body"},
		{"PUT", "/v1/models/a", `{} {}`, "", "invalid_json"},
		{"POST", "/v1/models/unload", `{}`, "models", "invalid_request"},
		{"POST", "/v1/models/unload", `{"models":["a b"]}`, "model", "invalid_request"},
		{"POST", "/v1/models/m/infer", `{}`, "input", "invalid_request"},
		{"POST", "/v1/models/m/infer", `{"input":{},"admission_timeout_ms":-5}`, "admission_timeout_ms", "invalid_request"},
		{"PUT", "/v1/settings/models-root", `{}`, "models_root", "invalid_request"},
	} {
		r := ts.do(c.method, c.path, c.body, "Content-Type", "application/json")
		if r.status != 400 {
			t.Errorf("%s %s %s: %d %s, want 400", c.method, c.path, c.body, r.status, r.body)
			continue
		}
		var raw map[string]map[string]any
		if err := json.Unmarshal(r.body, &raw); err != nil {
			t.Fatal(err)
		}
		e := raw["error"]
		param, _ := e["param"].(string)
		code, _ := e["code"].(string)
		if param != c.param || code != c.code || c.param == "" && e["param"] != nil {
			t.Errorf("%s %s %s: param %v code %v, want %q %q (%s)", c.method, c.path, c.body, e["param"], e["code"], c.param, c.code, r.body)
		}
	}
}
