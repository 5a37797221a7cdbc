package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// requireTool returns the path of a command a test needs; without it the
// test fails: `make deps`, which `make test` runs first, installs it.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s missing: %v (make deps installs Debian's %s)", name, err, pkg)
	}
	return p
}

// metricLines returns the sample lines of text whose name is name.
func metricLines(text, name string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			out = append(out, l)
		}
	}
	return out
}

// The request histogram is labelled by chi's route pattern, never the raw
// path (bounded cardinality): a model ID or an unknown path never becomes
// a label value; refusals before routing and unknown routes are
// "unmatched", and hostile methods are "other".
func TestHTTPMetricsRoutePattern(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("secretmodel", `{"engine":"fixture"}`)
	// Through the handler, so each request is observed before do returns.
	ts.must(200, "POST", "/v1/models/secretmodel/infer", `{"input":1}`)
	ts.must(404, "GET", "/v1/nosuchplace/zzzpath", "")
	ts.must(405, "FROB", "/v1/models/secretmodel/infer", "")
	text := ts.metricsText()
	lines := metricLines(text, "sluice_http_request_duration_seconds_count")
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		`sluice_http_request_duration_seconds_count{method="POST",route="/v1/models/{id}/infer",status="2xx"} 1`,
		`sluice_http_request_duration_seconds_count{method="PUT",route="/v1/models/{id}",status="2xx"} 1`,
		`sluice_http_request_duration_seconds_count{method="GET",route="unmatched",status="4xx"} 1`,
		`,status="4xx"} 1`, // the FROB
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no %s in\n%s", want, all)
		}
	}
	if strings.Contains(all, `method="FROB"`) || !strings.Contains(all, `method="other"`) {
		t.Errorf("method label not bounded:\n%s", all)
	}
	var reqLines []string
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		reqLines = append(reqLines, metricLines(text, "sluice_http_request_duration_seconds"+suffix)...)
	}
	for _, raw := range []string{"secretmodel", "zzzpath", "nosuchplace"} {
		if strings.Contains(strings.Join(reqLines, "\n"), raw) {
			t.Errorf("raw path %q in the request metrics:\n%s", raw, all)
		}
	}
	if l := metricLines(text, "sluice_http_requests_in_flight"); len(l) != 1 || l[0] != "sluice_http_requests_in_flight 0" {
		t.Errorf("in flight: %q", l)
	}
	if l := metricLines(text, "sluice_build_info"); len(l) != 1 || !strings.Contains(l[0], `goversion="go`) || !strings.HasSuffix(l[0], " 1") {
		t.Errorf("build info: %q", l)
	}
	if l := metricLines(text, "sluice_resident_bytes"); len(l) != 1 {
		t.Errorf("resident bytes: %q", l)
	}
}

// A request being served is in flight until its handler returns.
func TestHTTPMetricsInFlight(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture"}`)
	done := make(chan resp, 1)
	go func() { done <- ts.do("POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`) }()
	ts.awaitGate("g", 1)
	if l := metricLines(ts.metricsText(), "sluice_http_requests_in_flight"); len(l) != 1 || l[0] != "sluice_http_requests_in_flight 1" {
		t.Errorf("in flight while held: %q", l)
	}
	ts.s.Fixture().Gates().Open("g")
	if r := <-done; r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if l := metricLines(ts.metricsText(), "sluice_http_requests_in_flight"); len(l) != 1 || l[0] != "sluice_http_requests_in_flight 0" {
		t.Errorf("in flight after: %q", l)
	}
}

// A live server's /metrics passes `promtool check metrics` (Debian's
// prometheus package): names, help, base units, histogram and counter
// conventions.
func TestMetricsPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool", "prometheus")
	ts := newServer(t, nil)
	// Traffic first, through the handler (each observed before the next),
	// so every family has samples: loads, admissions, refusals, requests.
	ts.put("a", `{"engine":"fixture","slots":2}`)
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	ts.must(404, "POST", "/v1/models/x/infer", `{"input":1}`)
	ts.must(200, "POST", "/v1/models/a/unload", "")
	ts.awaitMetrics(`sluice_unload_seconds_count{cause="unload",model="a"} 1`)
	ts.serve()
	req, err := http.NewRequestWithContext(context.Background(), "GET", ts.url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("%d %v %s", res.StatusCode, err, body)
	}
	for _, fam := range []string{"sluice_http_request_duration_seconds_bucket", "sluice_build_info", "go_goroutines",
		"process_resident_memory_bytes", "sluice_load_seconds_count", "sluice_resident_bytes"} {
		if len(metricLines(string(body), fam)) == 0 {
			t.Errorf("no %s in /metrics", fam)
		}
	}
	cmd := exec.CommandContext(ctxLimit(t), promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	t.Logf("promtool check metrics: ok %s", out)
}

// Per-model series are bounded: past modelSeriesLimit models (2 here),
// later models share model="_other", their gauges, counters and
// histograms summed, and their IDs never become label values.
func TestMetricsModelBound(t *testing.T) {
	ts := newServer(t, nil)
	ts.s.met.LimitModelSeries(2)
	ts.put("a", `{"engine":"fixture"}`)
	ts.put("b", `{"engine":"fixture"}`)
	ts.awaitMetrics(`sluice_load_seconds_count{model="a"} 1`, `sluice_load_seconds_count{model="b"} 1`)
	ts.put("cc", `{"engine":"fixture","slots":2}`)
	ts.put("dd", `{"engine":"fixture"}`)
	for _, id := range []string{"a", "cc", "dd", "dd"} {
		ts.must(200, "POST", "/v1/models/"+id+"/infer", `{"input":1}`)
	}
	ts.must(200, "POST", "/v1/models/dd/unload", "")
	ts.awaitMetrics(`sluice_load_seconds_count{model="_other"} 2`, `sluice_unload_seconds_count{cause="unload",model="_other"} 1`,
		`sluice_admissions_total{model="_other"} 3`, `sluice_admissions_total{model="a"} 1`,
		`sluice_admission_wait_seconds_count{model="_other"} 3`, `sluice_slots{model="_other"} 3`,
		`sluice_model_state{model="_other",state="ready"} 1`, `sluice_model_state{model="_other",state="unloaded"} 1`,
		`sluice_model_state{model="b",state="ready"} 1`)
	text := ts.metricsText()
	for _, id := range []string{`model="cc"`, `model="dd"`} {
		if strings.Contains(text, id) {
			t.Fatalf("%s has its own series past the bound:\n%s", id, text)
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.CommandContext(ctxLimit(t), p, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool check metrics: %v\n%s", err, out)
		}
	}
}
