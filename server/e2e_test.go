package server

import (
	"bufio"
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// End-to-end tests: one per endpoint, over a real loopback listener
// (127.0.0.1, port 0), with net/http's client.

func TestE2EHealthz(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.APIKey = "k" })
	if r := ts.must(200, "GET", "/healthz", ""); !strings.Contains(string(r.body), "ok") {
		t.Fatal(string(r.body))
	}
}

func TestE2EReadyz(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.APIKey = "k" })
	ts.must(200, "GET", "/readyz", "")
}

func TestE2EMetrics(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	// Admissions are counted by the runtime as they happen; the load's
	// duration reaches the metrics through the lifecycle feed.
	ts.awaitMetrics(`sluice_admissions_total{model="a"} 1`, `sluice_load_seconds_count{model="a"} 1`)
	r := ts.must(200, "GET", "/metrics", "")
	for _, want := range []string{"sluice_active_slots", "sluice_queued_requests", "sluice_admissions_total",
		"sluice_admission_wait_seconds", "sluice_load_seconds", "sluice_model_state", "go_goroutines"} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("metrics without %s", want)
		}
	}
}

func TestE2EListModels(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("b", `{"engine":"fixture"}`)
	ts.put("a", `{"engine":"fixture","slots":3}`)
	var list ModelList
	ts.must(200, "GET", "/v1/models", "").json(t, &list)
	if len(list.Data) != 2 || list.Data[0].ID != "b" || list.Data[1].ID != "a" || list.Data[1].Slots != 3 {
		t.Fatalf("%+v", list)
	}
}

func TestE2EGetModel(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","task":"vad"}`)
	if m := ts.model("a"); m.Task != "vad" || m.State != "ready" {
		t.Fatalf("%+v", m)
	}
	ts.must(404, "GET", "/v1/models/zz", "").errType(t)
}

// The answer's id is the request ID of X-Request-Id, given or generated.
func TestE2EInfer(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":2}`)
	r := ts.must(200, "POST", "/v1/models/a/infer", `{"input":{"text":"hi"}}`, httpapi.RequestIDHeader, "req-1")
	var res struct {
		ID            string         `json:"id"`
		Output        map[string]any `json:"output"`
		ConfigVersion uint64         `json:"config_version"`
		Slot          *int           `json:"slot"`
	}
	r.json(t, &res)
	if res.ID != "req-1" || r.header.Get(httpapi.RequestIDHeader) != "req-1" || res.ConfigVersion != 1 || res.Slot == nil ||
		res.Output["model"] != "a" {
		t.Fatalf("%s", r.body)
	}
	r = ts.must(200, "POST", "/v1/models/a/infer", `{"input":null,"stream":false,"admission_timeout_ms":1000}`)
	r.json(t, &res)
	if res.ID == "" || res.ID != r.header.Get(httpapi.RequestIDHeader) {
		t.Fatalf("id %q, header %q", res.ID, r.header.Get(httpapi.RequestIDHeader))
	}
	ts.must(404, "POST", "/v1/models/zz/infer", `{"input":1}`).errType(t)
	if r := ts.must(500, "POST", "/v1/models/a/infer", `{"input":{"fail":true}}`); r.errType(t) != "internal_error" {
		t.Fatal(string(r.body))
	}
}

// A stream is text/event-stream: one data event per chunk, then [DONE].
func TestE2EInferStream(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","options":{"chunks":3}}`)
	r := ts.must(200, "POST", "/v1/models/a/infer", `{"input":{},"stream":true}`)
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			events = append(events, line)
		}
	}
	if len(events) != 4 || events[3] != "data: [DONE]" || !strings.Contains(events[2], `"chunk":2`) {
		t.Fatalf("events: %q", events)
	}
	// A failure before the first chunk is an ordinary error answer.
	ts.must(500, "POST", "/v1/models/a/infer", `{"input":{"fail":true},"stream":true}`).errType(t)
	if m := ts.model("a"); m.ActiveSlots != 0 {
		t.Fatalf("%+v", m)
	}
}

func TestE2EPutModel(t *testing.T) {
	ts := startServer(t, nil)
	if m := ts.put("a", `{"engine":"fixture","checkpoint":"v","task":"tts","slots":2,"options":{"load_ms":0},"admission_timeout_ms":500,"max_queue":4}`); m.ConfigVersion != 1 || !m.Loaded {
		t.Fatalf("%+v", m)
	}
	if m := ts.put("a", `{"engine":"fixture","slots":4}`); m.ConfigVersion != 2 || m.Slots != 4 || !m.Loaded {
		t.Fatalf("reconfigure: %+v", m)
	}
	if m := ts.put("a", `{"engine":"fixture","slots":4}`); m.ConfigVersion != 2 {
		t.Fatalf("identical spec: %+v", m)
	}
	ts.must(400, "PUT", "/v1/models/a", `{"engine":"fixture","slots":4,"options":{"fail_load":1}}`).errType(t)
}

func TestE2ELoad(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	ts.must(200, "POST", "/v1/models/a/unload", "")
	var m Model
	ts.must(200, "POST", "/v1/models/a/load", "").json(t, &m)
	if !m.Loaded || m.State != "ready" {
		t.Fatalf("%+v", m)
	}
	ts.must(404, "POST", "/v1/models/zz/load", "").errType(t)
}

func TestE2EUnload(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	for range 2 { // idempotent
		var u wire.UnloadResult
		ts.must(200, "POST", "/v1/models/a/unload", "").json(t, &u)
		if u.ID != "a" || u.Loaded {
			t.Fatalf("%+v", u)
		}
	}
	ts.must(404, "POST", "/v1/models/zz/unload", "").errType(t)
}

func TestE2EBulkUnload(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	ts.put("b", `{"engine":"fixture"}`)
	var res wire.BulkUnloadResult
	ts.must(200, "POST", "/v1/models/unload", `{"models":["a","nope","b"]}`).json(t, &res)
	if strings.Join(res.Unloaded, ",") != "a,b" || strings.Join(res.NotFound, ",") != "nope" {
		t.Fatalf("%+v", res)
	}
	if ts.model("a").Loaded || ts.model("b").Loaded {
		t.Fatal("still loaded")
	}
}

// A black-box client reaches "A is unloading slowly" through a gate, sees
// it in the status and in the gate list, and releases it.
func TestE2EFixtureGates(t *testing.T) {
	ts := startServer(t, nil)
	ts.put("a", `{"engine":"fixture","options":{"gates":{"teardown":"td"}}}`)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { ts.must(200, "POST", "/v1/models/a/unload", "") })
	ts.awaitGate("td", 1)
	var gates GateList
	ts.must(200, "GET", "/v1/fixture/gates", "").json(t, &gates)
	if len(gates.Gates) != 1 || gates.Gates[0].Name != "td" || gates.Gates[0].Open || gates.Gates[0].Waiting != 1 {
		t.Fatalf("%+v", gates)
	}
	if m := ts.model("a"); m.State != "unloading" || m.Loaded || m.MaxParallelSlots != nil {
		t.Fatalf("%+v", m)
	}
	ts.must(200, "POST", "/v1/fixture/gates/td/open", "")
	wg.Wait()
	if m := ts.model("a"); m.State != "unloaded" {
		t.Fatalf("%+v", m)
	}
	ts.must(400, "POST", "/v1/fixture/gates/bad%20name/open", "").errType(t)
}

// Error shapes over the wire: 401, 403, 404, 400 and 503 all carry
// {"error":{"message","type","code"}}.
func TestE2EErrorShapes(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.APIKey = "k"; c.UIManagement = false })
	for _, c := range []struct {
		method, path, body string
		status             int
		typ                string
		auth               bool
	}{
		{"GET", "/v1/models", "", 401, "invalid_request_error", false},
		{"PUT", "/v1/models/a", `{"engine":"fixture"}`, 403, "permission_error", true},
		{"GET", "/v1/models/a", "", 404, "not_found_error", true},
		{"POST", "/v1/models/a/infer", `{}`, 400, "invalid_request_error", true},
	} {
		var hdr []string
		if c.auth {
			hdr = []string{"Authorization", "Bearer k"}
		}
		r := ts.do(c.method, c.path, c.body, hdr...)
		if r.status != c.status || r.errType(t) != c.typ || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%+v: %d %s", c, r.status, r.body)
		}
	}
}
