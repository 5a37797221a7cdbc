package gen

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// TestGeneratedFresh is the drift check: conformance/matrices/gen.yaml must
// be exactly what the generator writes from the spec today (`make
// generate-cases` rewrites it).
func TestGeneratedFresh(t *testing.T) {
	rs, err := WalkAll()
	if err != nil {
		t.Fatal(err)
	}
	want := Render(rs, Bounds)
	got, err := os.ReadFile("../../conformance/matrices/gen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("conformance/matrices/gen.yaml differs from what the spec generates: run `make generate-cases`")
	}
}

// TestWalkGeneratesEveryPair: within the default bound the spec decides
// every pair and a case observes each, so every pair gets a case, and
// every case ends with every call answered (the loader checks the awaits).
func TestWalkGeneratesEveryPair(t *testing.T) {
	res, err := Walk(DefaultBound)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != res.Pairs || res.Open != 0 || res.Unobservable != 0 || res.Pairs < 300 {
		t.Fatalf("pairs %d, cases %d, open %d, unobservable %d", res.Pairs, len(res.Cases), res.Open, res.Unobservable)
	}
	seen := map[string]bool{}
	for _, c := range res.Cases {
		if seen[c.Name] {
			t.Fatalf("case %s twice", c.Name)
		}
		seen[c.Name] = true
		if c.ActAt >= len(c.Steps) {
			t.Fatalf("%s: the action is not among its steps", c.Name)
		}
	}
}

// TestWalkFollowsTheSpec pins a few predictions the contract states, so a
// generator that stopped asking the spec would fail: a DELETE behind a
// running request queues as a manager (unreg.barrier), and a request sent
// after it is answered 404 once M is gone (unreg.404-after).
func TestWalkFollowsTheSpec(t *testing.T) {
	res, err := Walk(DefaultBound)
	if err != nil {
		t.Fatal(err)
	}
	text := Render([]*Result{res}, []Bound{DefaultBound})
	for _, want := range []string{
		"      - http: {method: DELETE, path: /v1/models/$M, as: c3}\n" +
			"      - await_model: {model: M, state: ready, loaded: true, slots: 1, active_slots: 1, queued_requests: 0, queued_managers: 1, config_version: 1}\n",
		"      - infer: {model: M, input: {gate: g4}, as: c4}\n" +
			"      - await_model: {model: M, state: ready, loaded: true, slots: 1, active_slots: 1, queued_requests: 1, queued_managers: 1, config_version: 1}\n",
		"      - await: {call: c4, status: 404, error: not_found_error}\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no generated case has:\n%s", want)
		}
	}
}

// TestHandCoverage interprets a hand-written case on the spec: its steps
// reach the pairs of the walk they take, and interpretation stops at a
// step outside the walk's alphabet.
func TestHandCoverage(t *testing.T) {
	res, err := Walk(DefaultBound)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"x.yaml": {Data: []byte(`matrix: x
cases:
  - name: x.barrier
    steps:
      - put: {model: M, slots: 1}
      - infer: {model: M, as: r1, input: {gate: gR1}}
      - http: {method: DELETE, path: /v1/models/$M, as: del}
      - open: gR1
  - name: x.stops
    steps:
      - put: {model: N, slots: 1, options: {gates: {load: gL}}}
      - infer: {model: N}
  - name: x.own
    server: {max_loaded_models: 1}
    steps:
      - put: {model: M, slots: 1}
`)}}
	cov, err := HandCoverage(fsys, res)
	if err != nil {
		t.Fatal(err)
	}
	if cov.Cases != 3 || cov.Interpreted != 1 || cov.Hand != 4 || cov.HandInWalk != 4 || cov.Both != 4 {
		t.Fatalf("%+v", cov)
	}
}
