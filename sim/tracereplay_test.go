package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// simTrace writes the trace of a simulated run (the runtime's format, with
// its options beside it) and returns its path.
func simTrace(t *testing.T, seed string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.ndjson")
	var out, errb bytes.Buffer
	if rc := Main([]string{"--seed", seed, "--steps", "3000", "--trace", p, "--quiet", "--minimize", "0"}, &out, &errb); rc != 0 {
		t.Fatalf("sim: %d\n%s%s", rc, out.String(), errb.String())
	}
	return p
}

// TestReplayTraceAgrees: a recorded trace replays on core with exactly its
// recorded effects, and the replay's figures count what the trace holds.
func TestReplayTraceAgrees(t *testing.T) {
	for _, seed := range []string{"3", "7", "12"} {
		p := simTrace(t, seed)
		rep, err := ReplayTraceFile(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Diverged != nil {
			t.Fatalf("seed %s: diverged at line %d: %s\nrecorded %q\nreplayed %q", seed, rep.Diverged.Line, rep.Diverged.Event,
				rep.Diverged.Recorded, rep.Diverged.Replayed)
		}
		b, _ := os.ReadFile(p)
		if n := strings.Count(string(b), `"ev":`); rep.Events != n || n == 0 {
			t.Fatalf("seed %s: replayed %d events of %d", seed, rep.Events, n)
		}
		grants := strings.Count(string(b), `"ef":"Grant"`)
		got := 0
		for _, m := range rep.Models {
			got += m.Granted
		}
		if got != grants {
			t.Fatalf("seed %s: %d grants counted, the trace has %d", seed, got, grants)
		}
	}
}

// TestReplayTraceDetectsDivergence plants divergences: an effect edited,
// an effect dropped, and the right trace under other options. Each is
// reported at the event it concerns.
func TestReplayTraceDetectsDivergence(t *testing.T) {
	p := simTrace(t, "7")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	grant := -1
	for i, l := range lines {
		if strings.Contains(l, `"ef":"Grant"`) && i > 100 {
			grant = i
			break
		}
	}
	if grant < 0 {
		t.Fatal("no grant in the trace")
	}
	event := grant
	for !strings.Contains(lines[event], `"ev":`) {
		event--
	}
	var o core.Options
	ob, _ := os.ReadFile(strings.TrimSuffix(p, ".ndjson") + ".options.json")
	if err := jsonUnmarshal(ob, &o); err != nil {
		t.Fatal(err)
	}
	edited := func(change func([]string) []string) *TraceReplay {
		t.Helper()
		ls := change(append([]string(nil), lines...))
		rep, err := ReplayTrace(strings.NewReader(strings.Join(ls, "\n")), o)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for name, change := range map[string]func([]string) []string{
		"version edited": func(ls []string) []string {
			var r core.Record
			if err := jsonUnmarshal([]byte(ls[grant]), &r); err != nil {
				t.Fatal(err)
			}
			r.Version++
			nb, err := core.MarshalRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			ls[grant] = strings.TrimSpace(string(nb))
			return ls
		},
		"effect dropped": func(ls []string) []string { return append(ls[:grant], ls[grant+1:]...) },
	} {
		rep := edited(change)
		if rep.Diverged == nil || rep.Diverged.Line != event+1 {
			t.Errorf("%s: want a divergence at line %d, got %+v", name, event+1, rep.Diverged)
		}
	}
	if rep := edited(func(ls []string) []string { return ls }); rep.Diverged != nil {
		t.Fatalf("the unedited trace diverged: %+v", rep.Diverged)
	}
	// Under other options than it ran with (a memory budget too small for
	// one of its models), the same trace diverges.
	o.MemoryBudgetMB = 1000
	rep, err := ReplayTrace(bytes.NewReader(b), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged == nil {
		t.Errorf("a trace replayed with a memory budget of 1000 MB instead of %s agreed", ob)
	}
}
