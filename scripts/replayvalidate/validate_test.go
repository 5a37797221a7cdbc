package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScheduleSeeded: the same seed and length give the same workload,
// another seed another one; every model gets requests and bursts, and the
// management operations come in their order.
func TestScheduleSeeded(t *testing.T) {
	a, b, c := schedule(1, 10*time.Second), schedule(1, 10*time.Second), schedule(2, 10*time.Second)
	if !slices.Equal(a, b) {
		t.Fatal("seed 1 gave two schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 1 and 2 gave the same schedule")
	}
	n, bursts := map[string]int{}, map[string]int{}
	var ops []string
	for k, x := range a {
		if k > 0 && x.At < a[k-1].At {
			t.Fatalf("arrival %d at %v before %v", k, x.At, a[k-1].At)
		}
		if x.Op != "" {
			ops = append(ops, x.Op)
			continue
		}
		n[x.Model]++
		if x.Burst {
			bursts[x.Model]++
		}
	}
	for _, m := range models {
		if n[m.ID] == 0 || bursts[m.ID] < m.Burst {
			t.Fatalf("model %s: %d requests, %d in bursts", m.ID, n[m.ID], bursts[m.ID])
		}
	}
	if strings.Join(ops, ",") != "reconfigure,unload,register,delete" {
		t.Fatalf("operations %v", ops)
	}
}

// TestServiceTimes: grant to release per model, from a trace's lines.
func TestServiceTimes(t *testing.T) {
	trace := `{"ev":"SubmitRequest","t":10,"model":"a","ticket":7}
{"ef":"Grant","t":10,"model":"a","ticket":7}
{"ev":"SubmitRequest","t":20,"model":"b","ticket":8}
{"ev":"Release","t":50,"ticket":7}
{"ef":"Grant","t":60,"model":"b","ticket":8}
{"ev":"Release","t":90,"ticket":8}
{"ev":"Release","t":95,"ticket":9}
`
	p := filepath.Join(t.TempDir(), "t.ndjson")
	if err := os.WriteFile(p, []byte(trace), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := serviceTimes(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got["a"], []time.Duration{40}) || !slices.Equal(got["b"], []time.Duration{30}) {
		t.Fatalf("service times %v", got)
	}
}

// TestRatioVerdict: within 20%, or within 2 ms of a tiny wait, is ok.
func TestRatioVerdict(t *testing.T) {
	for _, c := range []struct {
		pred, meas time.Duration
		ok         bool
	}{
		{100 * time.Millisecond, 100 * time.Millisecond, true},
		{81 * time.Millisecond, 100 * time.Millisecond, true},
		{79 * time.Millisecond, 100 * time.Millisecond, false},
		{121 * time.Millisecond, 100 * time.Millisecond, false},
		{time.Millisecond, 0, true},
		{3 * time.Millisecond, 0, false},
		{2500 * time.Microsecond, time.Millisecond, true},
	} {
		if got := strings.HasSuffix(ratio(c.pred, c.meas), " ok"); got != c.ok {
			t.Errorf("ratio(%v, %v) = %q, want ok %v", c.pred, c.meas, ratio(c.pred, c.meas), c.ok)
		}
	}
	if pct([]time.Duration{1, 2, 3, 4}, 50) != 2 || pct([]time.Duration{1, 2, 3, 4}, 99) != 3 || pct(nil, 50) != 0 {
		t.Fatal("pct does not follow the simulator's rule")
	}
}

// TestConfigYAML: the --config file names every model with its slots.
func TestConfigYAML(t *testing.T) {
	b, err := configYAML(setup{Name: "x", Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		if !strings.Contains(string(b), `"id":"`+m.ID+`"`) {
			t.Fatalf("model %s missing:\n%s", m.ID, b)
		}
	}
	if strings.Count(string(b), `"slots":2`) != len(models) {
		t.Fatalf("slots:\n%s", b)
	}
}
