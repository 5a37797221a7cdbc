package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/modelsroot"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// Handler tests: the router and handlers through httptest.NewRecorder.

func TestStatusEndpoints(t *testing.T) {
	ts := newServer(t, nil)
	ts.must(200, "GET", "/healthz", "")
	ts.must(200, "GET", "/readyz", "")
	var list ModelList
	ts.must(200, "GET", "/v1/models", "").json(t, &list)
	if list.Object != "list" || list.Data == nil || len(list.Data) != 0 {
		t.Fatalf("empty list: %+v", list)
	}
	if r := ts.must(404, "GET", "/v1/models/nope", ""); r.errType(t) != "not_found_error" {
		t.Fatal(string(r.body))
	}
	if r := ts.must(400, "GET", "/v1/models/bad%20id", ""); r.errType(t) != "invalid_request_error" {
		t.Fatal(string(r.body))
	}
	ts.must(404, "GET", "/v1/nothing", "").errType(t)
	ts.must(405, "DELETE", "/v1/models", "").errType(t)

	m := ts.put("a", `{"engine":"fixture","task":"tts","slots":2}`)
	if m.ID != "a" || m.Object != "model" || m.Task != "tts" || m.Engine != "fixture" || m.State != "ready" || !m.Loaded ||
		m.Slots != 2 || m.MaxParallelSlots == nil || *m.MaxParallelSlots != 16 || m.ConfigVersion != 1 {
		t.Fatalf("model object: %+v", m)
	}
	r := ts.must(200, "GET", "/v1/models/a", "")
	for _, k := range []string{`"id"`, `"object"`, `"task"`, `"engine"`, `"state"`, `"loaded"`, `"slots"`, `"active_slots"`,
		`"queued_requests"`, `"queued_managers"`, `"max_parallel_slots"`, `"config_version"`} {
		if !strings.Contains(string(r.body), k) {
			t.Fatalf("model object without %s: %s", k, r.body)
		}
	}
	ts.must(200, "POST", "/v1/models/a/unload", "")
	if r := ts.must(200, "GET", "/v1/models/a", ""); !strings.Contains(string(r.body), `"max_parallel_slots":null`) {
		t.Fatalf("max_parallel_slots after unload: %s", r.body)
	}
	if r := ts.must(200, "GET", "/metrics", ""); !strings.Contains(string(r.body), `sluice_model_state{model="a",state="unloaded"} 1`) {
		t.Fatalf("metrics: %s", r.body)
	}
}

// CONTRACT.md err.permission: management is 403 without --ui-management,
// status stays open.
func TestManagementForbidden(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.UIManagement = false })
	for _, c := range [][3]string{
		{"PUT", "/v1/models/a", `{"engine":"fixture"}`}, {"POST", "/v1/models/a/load", ""},
		{"POST", "/v1/models/a/unload", ""}, {"POST", "/v1/models/unload", `{"models":["a"]}`},
		{"GET", "/v1/fixture/gates", ""}, {"POST", "/v1/fixture/gates/g/open", ""},
	} {
		if r := ts.must(403, c[0], c[1], c[2]); r.errType(t) != "permission_error" {
			t.Fatalf("%v: %s", c, r.body)
		}
	}
	ts.must(200, "GET", "/v1/models", "")
	ts.must(404, "POST", "/v1/models/a/infer", `{"input":1}`)
}

// CONTRACT.md err.auth: 401 for a missing or wrong key; health needs none.
func TestAPIKeys(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.APIKey, c.ManagementKey = "k", "m" })
	ts.must(200, "GET", "/healthz", "")
	ts.must(200, "GET", "/readyz", "")
	if r := ts.must(401, "GET", "/v1/models", ""); r.errType(t) != "invalid_request_error" {
		t.Fatal(string(r.body))
	}
	ts.must(401, "GET", "/metrics", "")
	ts.must(401, "GET", "/v1/models", "", "Authorization", "Bearer wrong")
	ts.must(200, "GET", "/v1/models", "", "Authorization", "Bearer k")
	ts.must(401, "PUT", "/v1/models/a", `{"engine":"fixture"}`, "Authorization", "Bearer k")
	ts.must(200, "PUT", "/v1/models/a", `{"engine":"fixture"}`, "Authorization", "Bearer m")
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`, "Authorization", "Bearer k")
}

// CONTRACT.md mode.legacy-slots and mode.legacy-plain: any slots field is 400,
// nothing changes, no warning.
func TestLegacyMode(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.ParallelJobs = false })
	for _, spec := range []string{`{"engine":"fixture","slots":1}`, `{"engine":"fixture","slots":null}`, `{"engine":"fixture","slots":4}`} {
		if r := ts.must(400, "PUT", "/v1/models/a", spec); r.errType(t) != "invalid_request_error" {
			t.Fatal(string(r.body))
		}
	}
	ts.must(404, "GET", "/v1/models/a", "")
	if m := ts.put("a", `{"engine":"fixture"}`); m.Slots != 1 || !m.Loaded {
		t.Fatalf("%+v", m)
	}
	ts.must(400, "PUT", "/v1/models/a", `{"engine":"fixture","slots":1}`)
	if m := ts.model("a"); m.ConfigVersion != 1 {
		t.Fatalf("legacy slots changed the model: %+v", m)
	}
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":{}}`)
	if strings.Contains(ts.logs.String(), "level=WARN") {
		t.Fatalf("legacy mode warned:\n%s", ts.logs)
	}
}

// CONTRACT.md mode.parallel: exactly one startup warning.
func TestParallelWarning(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	if n := strings.Count(ts.logs.String(), "level=WARN"); n != 1 || !strings.Contains(ts.logs.String(), "experimental") {
		t.Fatalf("%d warnings:\n%s", n, ts.logs)
	}
}

// CONTRACT.md mode.slot-range and mode.slot-capacity: refused before
// anything live changes.
func TestSlotRange(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":2}`)
	for _, s := range []string{`0`, `17`, `-1`, `"2"`, `1.5`, `true`} {
		ts.must(400, "PUT", "/v1/models/a", `{"engine":"fixture","slots":`+s+`}`).errType(t)
		ts.must(400, "PUT", "/v1/models/new", `{"engine":"fixture","slots":`+s+`}`)
	}
	if m := ts.model("a"); m.Slots != 2 || m.ConfigVersion != 1 || !m.Loaded {
		t.Fatalf("refused spec changed the model: %+v", m)
	}
	ts.must(404, "GET", "/v1/models/new", "")
	// Above the advertised capacity: 400, the old pool keeps serving.
	ts.must(400, "PUT", "/v1/models/a", `{"engine":"fixture","slots":5,"options":{"capacity":4}}`).errType(t)
	if m := ts.model("a"); m.Slots != 2 || m.ConfigVersion != 1 || !m.Loaded {
		t.Fatalf("refused capacity changed the model: %+v", m)
	}
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
}

// Strict JSON, body limit, unknown engine, bad IDs (CONTRACT.md
// err.invalid-request).
func TestInvalidInput(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.MaxBody = 256 })
	for _, c := range [][3]string{
		{"PUT", "/v1/models/a", `{"engine":"fixture","bogus":1}`},
		{"PUT", "/v1/models/a", `{"engine":"fixture"} {}`},
		{"PUT", "/v1/models/a", `{"engine":"fixture"`},
		{"PUT", "/v1/models/a", ``},
		{"PUT", "/v1/models/a", `{"engine":"nope"}`},
		{"PUT", "/v1/models/a", `{"engine":"fixture","options":{"load_ms":"x"}}`},
		{"PUT", "/v1/models/a", `{"engine":"fixture","options":[1]}`},
		{"PUT", "/v1/models/a", `{"engine":"fixture","admission_timeout_ms":-1}`},
		{"PUT", "/v1/models/a..b%2F", `{"engine":"fixture"}`},
		{"PUT", "/v1/models/" + strings.Repeat("x", 129), `{"engine":"fixture"}`},
		{"POST", "/v1/models/unload", `{"models":["ok","bad id"]}`},
		{"POST", "/v1/models/unload", `{}`},
		{"POST", "/v1/models/unload", `{"models":"a"}`},
	} {
		if r := ts.do(c[0], c[1], c[2]); r.status != 400 || r.errType(t) != "invalid_request_error" {
			t.Fatalf("%v: %d %s", c, r.status, r.body)
		}
	}
	ts.put("a", `{"engine":"fixture"}`)
	for _, body := range []string{`{"input":1,"extra":2}`, `{"stream":true}`, `{"input":1}x`, `{"input":1,"admission_timeout_ms":-5}`} {
		ts.must(400, "POST", "/v1/models/a/infer", body).errType(t)
	}
	ts.must(400, "POST", "/v1/models/a/infer", `{"input":1}`, AdmissionTimeoutHeader, "soon")
	r := ts.must(413, "POST", "/v1/models/a/infer", `{"input":"`+strings.Repeat("x", 300)+`"}`)
	if r.errType(t) != "invalid_request_error" {
		t.Fatal(string(r.body))
	}
	if m := ts.model("a"); m.ConfigVersion != 1 {
		t.Fatalf("%+v", m)
	}
}

// Checkpoints stay inside --models-root: no "..", no absolute path, no
// symlink escape.
func TestCheckpointInsideRoot(t *testing.T) {
	ts := newServer(t, nil)
	root := ts.s.cfg.ModelsRoot
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "voices", "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "voices"), filepath.Join(root, "inside")); err != nil {
		t.Fatal(err)
	}
	for _, cp := range []string{"../x", "voices/../../x", "/etc", outside, "escape", "escape/y", "voices/missing", `a\b`, "./voices"} {
		if r := ts.do("PUT", "/v1/models/m", `{"engine":"fixture","checkpoint":"`+strings.ReplaceAll(cp, `\`, `\\`)+`"}`); r.status != 400 {
			t.Fatalf("checkpoint %q: %d %s", cp, r.status, r.body)
		}
	}
	for _, cp := range []string{"voices/a", "inside/a", "builtin-voice", ""} {
		ts.must(200, "PUT", "/v1/models/m", `{"engine":"fixture","checkpoint":"`+cp+`"}`)
	}
	got, err := modelsroot.Resolve(root, "inside/a")
	want, _ := filepath.EvalSymlinks(filepath.Join(root, "voices", "a"))
	if err != nil || got != want {
		t.Fatalf("resolved %q, %v; want %q", got, err, want)
	}
}

// CONTRACT.md err.server-busy: 503 server_busy with Retry-After, for the
// body's timeout, the header's, and a full queue.
func TestServerBusy(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1,"max_queue":1}`)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { ts.must(200, "POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`) })
	ts.awaitGate("g", 1)
	for _, c := range []struct{ body, hdr string }{
		{`{"input":1,"admission_timeout_ms":1}`, ""},
		{`{"input":1}`, "1"},
	} {
		var hdr []string
		if c.hdr != "" {
			hdr = []string{AdmissionTimeoutHeader, c.hdr}
		}
		r := ts.must(503, "POST", "/v1/models/a/infer", c.body, hdr...)
		if r.errType(t) != "server_busy" || r.header.Get("Retry-After") == "" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
	}
	// A full queue: one request waits, the next is refused at once.
	rec := ts.records()
	wg.Go(func() { ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`) })
	rec.next("the queued request", isEv(core.EvSubmitRequest, "a"))
	r := ts.must(503, "POST", "/v1/models/a/infer", `{"input":1}`)
	if r.errType(t) != "server_busy" || r.header.Get("Retry-After") == "" {
		t.Fatal(string(r.body))
	}
	ts.s.Fixture().Gates().Open("g")
	wg.Wait()
	if m := ts.model("a"); m.ActiveSlots != 0 || m.QueuedRequests != 0 {
		t.Fatalf("%+v", m)
	}
	ts.awaitMetrics(`sluice_rejections_total{model="a",reason="server_busy"} 3`, `sluice_admissions_total{model="a"} 2`,
		`sluice_load_seconds_count{model="a"} 1`, `sluice_admission_wait_seconds_count{model="a"} 2`)
}

// The fixture endpoints exist only with --fixture, and so does the engine.
func TestFixtureOnlyWithFlag(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.Fixture = false })
	ts.must(404, "GET", "/v1/fixture/gates", "")
	ts.must(400, "PUT", "/v1/models/a", `{"engine":"fixture"}`)
}

func TestBulkUnload(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	ts.put("b", `{"engine":"fixture","slots":2}`)
	var res wire.BulkUnloadResult
	ts.must(200, "POST", "/v1/models/unload", `{"models":["b","x","a","b"]}`).json(t, &res)
	if strings.Join(res.Unloaded, ",") != "b,a" || strings.Join(res.NotFound, ",") != "x" {
		t.Fatalf("%+v", res)
	}
	r := ts.must(200, "POST", "/v1/models/unload", `{"models":[]}`)
	if string(r.body) != "{\"unloaded\":[],\"not_found\":[]}\n" {
		t.Fatalf("%s", r.body)
	}
	if string(ts.must(200, "POST", "/v1/models/a/unload", "").body) != "{\"id\":\"a\",\"loaded\":false}\n" {
		t.Fatal("unload answer")
	}
	ts.must(404, "POST", "/v1/models/x/unload", "").errType(t)
	ts.must(404, "POST", "/v1/models/x/load", "").errType(t)
	ts.awaitMetrics(`sluice_unload_seconds_count{cause="unload",model="b"} 1`, `sluice_unload_seconds_count{cause="unload",model="a"} 1`)
}

// CONTRACT.md reg.first-load-failure: 500 internal_error, the entry stays
// registered and unloaded; the failure is counted.
func TestLoadFailure(t *testing.T) {
	ts := newServer(t, nil)
	r := ts.must(500, "PUT", "/v1/models/a", `{"engine":"fixture","slots":2,"options":{"fail_clone_at":1}}`)
	if r.errType(t) != "internal_error" {
		t.Fatal(string(r.body))
	}
	// The core answers the PUT together with the teardown of the private
	// sessions, so the model may still be unloading here (reported to the
	// core's owner: the contract says the sessions are torn down first).
	if m := ts.model("a"); (m.State != "unloaded" && m.State != "unloading") || m.ConfigVersion != 1 || m.Loaded {
		t.Fatalf("%+v", m)
	}
	ts.awaitMetrics(`sluice_load_failures_total{model="a"} 1`, `sluice_unload_seconds_count{cause="failed_load",model="a"} 1`)
	if m := ts.model("a"); m.State != "unloaded" || m.ConfigVersion != 1 {
		t.Fatalf("%+v", m)
	}
}

// A model without admission_timeout_ms takes the server default
// (--admission-timeout); an explicit 0 waits without bound.
func TestModelAdmissionTimeout(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.AdmissionTimeout = time.Millisecond })
	ts.put("dflt", `{"engine":"fixture","slots":1}`)
	ts.put("unbounded", `{"engine":"fixture","slots":1,"admission_timeout_ms":0}`)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, m := range []string{"dflt", "unbounded"} {
		wg.Go(func() { ts.must(200, "POST", "/v1/models/"+m+"/infer", `{"input":{"gate":"g-`+m+`"}}`) })
		ts.awaitGate("g-"+m, 1)
	}
	rec := ts.records()
	var waited resp
	wg.Go(func() { waited = ts.do("POST", "/v1/models/unbounded/infer", `{"input":1}`) })
	rec.next("the unbounded request queued", isEv(core.EvSubmitRequest, "unbounded"))
	// The default-timeout request is refused after 1 ms; the unbounded one,
	// queued earlier, still waits.
	ts.must(503, "POST", "/v1/models/dflt/infer", `{"input":1}`).errType(t)
	if m := ts.model("unbounded"); m.QueuedRequests != 1 {
		t.Fatalf("the unbounded request left the queue: %+v", m)
	}
	ts.s.Fixture().Gates().Open("g-unbounded")
	ts.s.Fixture().Gates().Open("g-dflt")
	wg.Wait()
	if waited.status != 200 {
		t.Fatalf("%d %s", waited.status, waited.body)
	}
}

// A task route on a model registered for another task is 400 wrong_task,
// decided from the registered task before any lease: here the model's
// only slot is held, so a lease attempt would time out as 503 instead
// (CONTRACT.md err.wrong-task; it was a 500 or a 503).
func TestWrongTask(t *testing.T) {
	ts := newServer(t, nil)
	for id, task := range map[string]string{"a": "asr", "t": "tts", "v": "vad", "e": "echo"} {
		ts.put(id, `{"engine":"fixture","slots":1,"task":"`+task+`"}`)
	}
	ts.put("none", `{"engine":"fixture","slots":1}`)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, id := range []string{"a", "t", "v"} {
		wg.Go(func() { ts.must(200, "POST", "/v1/models/"+id+"/infer", `{"input":{"gate":"g`+id+`"}}`) })
		ts.awaitGate("g"+id, 1)
	}
	wav := "RIFF not really a wav"
	for _, c := range []struct{ path, body, task string }{
		{"/v1/audio/speech", `{"model":"a","input":"hi"}`, `"asr"`},
		{"/v1/audio/speech", `{"model":"v","input":"hi"}`, `"vad"`},
		{"/v1/audio/speech", `{"model":"e","input":"hi"}`, `"echo"`},
		{"/v1/audio/speech", `{"model":"none","input":"hi"}`, `no task`},
		{"/v1/audio/transcriptions?model=t", wav, `"tts"`},
		{"/v1/audio/transcriptions?model=v", wav, `"vad"`},
		{"/v1/audio/voice-activity?model=t", wav, `"tts"`},
		{"/v1/audio/voice-activity?model=a", wav, `"asr"`},
	} {
		ct := "application/json"
		if c.body == wav {
			ct = "audio/wav"
		}
		r := ts.do("POST", c.path, c.body, "Content-Type", ct, AdmissionTimeoutHeader, "1")
		var e errorBody
		r.json(t, &e)
		if r.status != 400 || e.Error.Code != "wrong_task" || !strings.Contains(e.Error.Message, c.task) {
			t.Errorf("%s %s: %d %s, want 400 wrong_task naming %s", c.path, c.body, r.status, r.body, c.task)
		}
	}
	ts.must(404, "POST", "/v1/audio/speech", `{"model":"ghost","input":"hi"}`)
	for _, id := range []string{"a", "t", "v"} {
		ts.s.Fixture().Gates().Open("g" + id)
	}
	wg.Wait()
	for _, id := range []string{"a", "t", "v", "e", "none"} {
		if m := ts.model(id); m.ActiveSlots != 0 || m.QueuedRequests != 0 {
			t.Fatalf("%s: %+v", id, m)
		}
	}
}

// --max-models caps registrations, by HTTP and at startup; reconfiguring a
// registered model still works, and concurrent new IDs cannot overshoot
// the cap (CONTRACT.md err.max-models; registrations were uncapped).
func TestMaxModels(t *testing.T) {
	if DefaultConfig().MaxModels != DefaultMaxModels || DefaultMaxModels <= 0 {
		t.Fatal("no default cap")
	}
	ts := newServer(t, func(c *Config) { c.MaxModels = 3 })
	for _, id := range []string{"a", "b", "c"} {
		ts.put(id, `{"engine":"fixture","slots":1}`)
	}
	r := ts.must(400, "PUT", "/v1/models/d", `{"engine":"fixture","slots":1}`)
	var e errorBody
	r.json(t, &e)
	if e.Error.Type != "invalid_request_error" || e.Error.Code != "too_many_models" || !strings.Contains(e.Error.Message, "3") {
		t.Fatalf("%s", r.body)
	}
	ts.must(404, "GET", "/v1/models/d", "")
	if m := ts.put("a", `{"engine":"fixture","slots":2}`); m.Slots != 2 {
		t.Fatalf("reconfigure at the cap: %+v", m)
	}

	const limit, tries = 5, 20
	tc := newServer(t, func(c *Config) { c.MaxModels = limit })
	var wg sync.WaitGroup
	codes := make(chan int, tries)
	for i := range tries {
		wg.Go(func() {
			codes <- tc.do("PUT", fmt.Sprintf("/v1/models/m%d", i), `{"engine":"fixture","slots":1}`).status
		})
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	if n[200] != limit || n[400] != tries-limit || len(tc.s.Runtime().Status()) != limit {
		t.Fatalf("answers %v, %d registered; want %d registered", n, len(tc.s.Runtime().Status()), limit)
	}

	// The startup config is capped too.
	ss := newServer(t, func(c *Config) { c.MaxModels = 2 })
	models, err := ParseModelsYAML([]byte("models:\n  - {id: x, engine: fixture}\n  - {id: y, engine: fixture}\n  - {id: z, engine: fixture}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.s.RegisterModels(ctxLimit(t), models); err == nil || !strings.Contains(err.Error(), "max-models") {
		t.Fatalf("startup beyond the cap: %v", err)
	}
	// 0: unlimited.
	tu := newServer(t, func(c *Config) { c.MaxModels = 0 })
	if err := tu.s.RegisterModels(ctxLimit(t), models); err != nil {
		t.Fatal(err)
	}
}
