package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

func newTestMetrics() *Metrics {
	return New(func() []core.ModelStatus { return nil }, func() []runtime.AdmissionStats { return nil })
}

func (m *Metrics) text() string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func eff(kind core.EffectKind, id string, job core.Job) runtime.StepEffect {
	return runtime.StepEffect{Effect: core.Effect{Kind: kind, Job: job}, ID: id}
}

// The feed times a load from its StartLoad to the Publish, counts a failed
// one once, and times a teardown by its cause; steps of other kinds (a
// full subscription's requests, its snapshot) change nothing. A Begin
// that lost steps forgets the loads under way; one that did not keeps them.
func TestFeed(t *testing.T) {
	m := newTestMetrics()
	m.Begin(1, false, false)
	m.Steps([]runtime.Step{
		{Event: core.Event{Kind: core.EvSubmitManager, Now: 0}, Effects: []runtime.StepEffect{eff(core.EfStartLoad, "a", 1)}},
		{Event: core.Event{Kind: core.EvSubmitManager, Now: 0}, Effects: []runtime.StepEffect{eff(core.EfStartLoad, "b", 2)}},
	})
	m.Begin(2, true, false) // the event stream is watched: the same loads go on
	m.Steps([]runtime.Step{
		{Event: core.Event{Kind: core.EvNone}},
		{Event: core.Event{Kind: core.EvSubmitRequest, Model: "a", Now: 1}},
		{Event: core.Event{Kind: core.EvLoadDone, Job: 1, Now: 2e9}, Effects: []runtime.StepEffect{eff(core.EfPublish, "a", 0)}},
		{Event: core.Event{Kind: core.EvLoadDone, Job: 2, Failed: true, Now: 3e9}},
		{Event: core.Event{Kind: core.EvLoadDone, Job: 2, Failed: true, Now: 3e9}}, // no second failure: counted once
		{Event: core.Event{Kind: core.EvSubmitManager, Now: 4e9}, Effects: []runtime.StepEffect{
			{Effect: core.Effect{Kind: core.EfStartTeardown, Job: 3, Cause: core.CauseUnload}, ID: "a"}}},
		{Event: core.Event{Kind: core.EvTeardownDone, Job: 3, Now: 4.5e9}},
		{Event: core.Event{Kind: core.EvSubmitManager, Now: 5e9}, Effects: []runtime.StepEffect{eff(core.EfStartLoad, "c", 4)}},
	})
	m.Begin(3, true, true) // lost: c's load is forgotten
	m.Steps([]runtime.Step{{Event: core.Event{Kind: core.EvLoadDone, Job: 4, Now: 6e9}, Effects: []runtime.StepEffect{eff(core.EfPublish, "c", 0)}}})
	text := m.text()
	for _, want := range []string{
		`sluice_load_seconds_sum{model="a"} 2`, `sluice_load_seconds_count{model="a"} 1`,
		`sluice_load_failures_total{model="b"} 1`,
		`sluice_unload_seconds_sum{cause="unload",model="a"} 0.5`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
	if strings.Contains(text, `model="c"`) {
		t.Errorf("a load begun before lost steps was timed:\n%s", text)
	}
}

// Past the series bound, models share model="_other".
func TestModelLabels(t *testing.T) {
	m := newTestMetrics()
	m.LimitModelSeries(1)
	if got := m.models.label("a"); got != "a" {
		t.Fatal(got)
	}
	if got := m.models.label("b"); got != otherModels {
		t.Fatal(got)
	}
	if got := m.models.label("a"); got != "a" {
		t.Fatal(got)
	}
}
