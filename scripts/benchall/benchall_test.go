package main

import (
	"slices"
	"strings"
	"testing"
)

func TestBenchTargetsFindsEveryBenchTargetButBenchAll(t *testing.T) {
	mk := "bench:\n\tgo test\nbench-runtime: x\nbench-all:\n\tgo run\n# bench-fake: a comment\nbench-whisper: models\nnot-bench:\nbench-runtime:\n"
	got := benchTargets(mk)
	want := []string{"bench", "bench-runtime", "bench-whisper"}
	if !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
}

func TestPairsMediansAndRatios(t *testing.T) {
	out := strings.Join([]string{
		"BenchmarkHotPath-2   	 100	 30 ns/op	 0 B/op",
		"BenchmarkHotPath-2   	 100	 40 ns/op	 0 B/op",
		"BenchmarkHotPath-2   	 100	 90 ns/op	 0 B/op",
		"BenchmarkSemaphoreBaseline-2 	 100	 20 ns/op",
		"BenchmarkHandoff/slots=4/runtime-acquire-2 	 10	 800 ns/op",
		"BenchmarkHandoff/slots=4/semaphore-clock-2 	 10	 400 ns/op",
		"BenchmarkEngines/flite-slt/slots=1-2 	 24	 5 ns/op	 10.0 req/s",
		"BenchmarkEngines/flite-slt/slots=2-2 	 24	 5 ns/op	 18.0 req/s",
	}, "\n")
	ps := pairs(parseBench(out))
	got := map[string]float64{}
	for _, p := range ps {
		got[p.name+" vs "+p.base] = p.value / p.baseValue
	}
	want := map[string]float64{
		"BenchmarkHotPath vs BenchmarkSemaphoreBaseline":                                       2, // median 40 over 20
		"BenchmarkHandoff/slots=4/runtime-acquire vs BenchmarkHandoff/slots=4/semaphore-clock": 2,
		"BenchmarkEngines/flite-slt/slots=2 vs BenchmarkEngines/flite-slt/slots=1":             1.8,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g < v-1e-9 || g > v+1e-9 {
			t.Errorf("%s: ratio %v (present %v), want %v; all: %v", k, g, ok, v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("pairs %v, want exactly %v", got, want)
	}
}

func TestSchedulerShare(t *testing.T) {
	out := strings.Join([]string{
		"BenchmarkHandoff/slots=1/runtime-acquire-2 	 10	 1000 ns/op",
		"BenchmarkEngines/espeak-en/slots=1-2 	 24	 2500000 ns/op	 354.4 req/s",
	}, "\n")
	got := schedulerShare(parseBench(out))
	if !strings.Contains(got, "0.040% of an espeak request (BenchmarkEngines/espeak-en/slots=1 2.50 ms/op); meets") {
		t.Fatalf("share line %q", got)
	}
	if got := schedulerShare(parseBench("BenchmarkEngines/espeak-en/slots=1-2 	 24	 1000 ns/op")); got != "" {
		t.Fatalf("a line without the runtime's figure: %q", got)
	}
	slow := strings.Replace(out, "1000 ns/op", "5000 ns/op", 1)
	if got := schedulerShare(parseBench(slow)); !strings.Contains(got, "0.200%") || !strings.Contains(got, "misses") {
		t.Fatalf("a share over the target: %q", got)
	}
}
