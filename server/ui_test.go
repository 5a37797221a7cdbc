package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// The dashboard's files are embedded and served at / and /ui/.
func TestUIFiles(t *testing.T) {
	ts := newServer(t, nil)
	for path, want := range map[string]string{
		"/":             "text/html",
		"/ui/app.js":    "javascript",
		"/ui/style.css": "text/css",
	} {
		r := ts.must(200, "GET", path, "")
		if ct := r.header.Get("Content-Type"); !strings.Contains(ct, want) {
			t.Fatalf("%s: content type %q", path, ct)
		}
		if r.header.Get("Content-Security-Policy") == "" || len(r.body) == 0 {
			t.Fatalf("%s: %v", path, r.header)
		}
	}
	if r := ts.must(200, "GET", "/", ""); !strings.Contains(string(r.body), `<script src="/ui/app.js"`) {
		t.Fatalf("index without its script: %s", r.body)
	}
	ts.must(404, "GET", "/ui/nope.js", "")
}

// GET /v1/ui/config tells the page whether to show management buttons.
func TestUIConfig(t *testing.T) {
	for _, mgmt := range []bool{true, false} {
		ts := newServer(t, func(c *Config) { c.UIManagement = mgmt })
		var c UIConfig
		ts.must(200, "GET", "/v1/ui/config", "").json(t, &c)
		if c.Management != mgmt || !c.ParallelJobs || !c.Fixture || c.MaxSlots != 16 {
			t.Fatalf("%+v", c)
		}
	}
}

// GET /v1/models/{id}/spec gives the committed spec in PUT's shape: PUT it
// back with another slot count and it reconfigures; a count above the
// engine's capacity is 400 and changes nothing.
func TestModelSpecRoundTrip(t *testing.T) {
	root := t.TempDir()
	writeCheckpoint(t, root, "voice-a", "fixture", 4)
	ts := newServer(t, func(c *Config) { c.ModelsRoot = root })
	ts.put("a", `{"engine":"fixture","task":"tts","checkpoint":"voice-a","slots":2,"options":{"capacity":4,"load_ms":0},"admission_timeout_ms":1500,"max_queue":3}`)
	var spec map[string]any
	ts.must(200, "GET", "/v1/models/a/spec", "").json(t, &spec)
	want := `{"admission_timeout_ms":1500,"checkpoint":"voice-a","engine":"fixture","max_queue":3,"options":{"capacity":4,"load_ms":0},"slots":2,"task":"tts"}`
	if b, _ := json.Marshal(spec); string(b) != want {
		t.Fatalf("spec %s\nwant %s", b, want)
	}
	spec["slots"] = 3
	b, _ := json.Marshal(spec)
	if m := ts.put("a", string(b)); m.Slots != 3 || m.ConfigVersion != 2 {
		t.Fatalf("%+v", m)
	}
	spec["slots"] = 8
	b, _ = json.Marshal(spec)
	r := ts.must(400, "PUT", "/v1/models/a", string(b))
	if r.errType(t) != "invalid_request_error" {
		t.Fatal(string(r.body))
	}
	if m := ts.model("a"); m.Slots != 3 || m.ConfigVersion != 2 || m.State != "ready" {
		t.Fatalf("%+v", m)
	}
	// Defaults stay defaults: no admission_timeout_ms, no max_queue.
	ts.put("b", `{"engine":"fixture"}`)
	var sb map[string]any
	ts.must(200, "GET", "/v1/models/b/spec", "").json(t, &sb)
	if b, _ := json.Marshal(sb); string(b) != `{"checkpoint":"","engine":"fixture","options":{},"slots":1,"task":""}` {
		t.Fatalf("%s", b)
	}
	ts.must(404, "GET", "/v1/models/zz/spec", "").errType(t)
}

// In the legacy mode the spec has no slots field (PUT would refuse it).
func TestModelSpecLegacy(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.ParallelJobs = false })
	ts.put("a", `{"engine":"fixture"}`)
	r := ts.must(200, "GET", "/v1/models/a/spec", "")
	if strings.Contains(string(r.body), "slots") {
		t.Fatalf("%s", r.body)
	}
	ts.must(200, "PUT", "/v1/models/a", string(r.body))
}

// The spec is a management endpoint.
func TestModelSpecNeedsManagement(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.UIManagement = false })
	ts.must(403, "GET", "/v1/models/a/spec", "").errType(t)
}
