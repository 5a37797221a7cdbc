package server

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// A burst of admission-timeout refusals is counted, one by one, in the
// metrics and logged at INFO a handful of times, never at ERROR (the issue:
// 2,153 ERROR lines in 30 s); CONTRACT.md err.refusal-log.
func TestRefusalsCountedAndSampled(t *testing.T) {
	ts := newServer(t, nil)
	t0 := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	now := t0
	ts.s.refuse.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ts.put("a", `{"engine":"fixture","slots":1}`)
	var hold sync.WaitGroup
	hold.Go(func() { ts.must(200, "POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`) })
	ts.awaitGate("g", 1)

	const n, workers = 1000, 8
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for range workers {
		wg.Go(func() {
			for range jobs {
				if r := ts.do("POST", "/v1/models/a/infer", `{"input":1}`, AdmissionTimeoutHeader, "1"); r.status != 503 {
					t.Errorf("%d %s", r.status, r.body)
				}
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()

	logs := ts.logs.String()
	if c := strings.Count(logs, "level=ERROR"); c != 0 {
		t.Fatalf("%d ERROR lines:\n%s", c, logs)
	}
	if c := strings.Count(logs, `msg="request refused"`); c != httpapi.RefusalBurst {
		t.Fatalf("%d refusal lines logged for %d refusals at one instant, want %d", c, n, httpapi.RefusalBurst)
	}
	if !strings.Contains(ts.metricsText(), `sluice_http_refusals_total{code="server_busy",type="server_busy"} 1000`) {
		t.Fatalf("refusals not counted:\n%s", grepLines(ts.metricsText(), "sluice_http_refusals"))
	}
	// A second later the next refusal is logged with the suppressed count.
	mu.Lock()
	now = t0.Add(time.Second)
	mu.Unlock()
	ts.must(503, "POST", "/v1/models/a/infer", `{"input":1}`, AdmissionTimeoutHeader, "1")
	if !strings.Contains(ts.logs.String(), "suppressed=995") {
		t.Fatalf("no suppressed count:\n%s", grepLines(ts.logs.String(), "request refused"))
	}
	// Other refusals are counted under their own type and code.
	ts.must(404, "GET", "/v1/models/ghost", "")
	ts.must(415, "POST", "/v1/models/a/infer", `{"input":1}`, "Content-Type", "text/plain")
	text := ts.metricsText()
	for _, want := range []string{
		`sluice_http_refusals_total{code="model_not_found",type="not_found_error"} 1`,
		`sluice_http_refusals_total{code="unsupported_media_type",type="invalid_request_error"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s:\n%s", want, grepLines(text, "sluice_http_refusals"))
		}
	}
	ts.s.Fixture().Gates().Open("g")
	hold.Wait()
}

// Internal errors stay at ERROR, each one.
func TestInternalErrorsLogged(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	for range 3 {
		ts.must(500, "POST", "/v1/models/a/infer", `{"input":{"fail":true}}`)
	}
	if c := strings.Count(ts.logs.String(), "level=ERROR"); c != 3 {
		t.Fatalf("%d ERROR lines for 3 internal errors:\n%s", c, ts.logs.String())
	}
	if strings.Contains(ts.metricsText(), `type="internal_error"`) {
		t.Fatal("an internal error counted as a refusal")
	}
}

func grepLines(text, sub string) string {
	var out []string
	for l := range strings.Lines(text) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
