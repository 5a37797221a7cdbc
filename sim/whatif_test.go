package sim

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
)

const ms = int64(time.Millisecond)

// skeleton writes the outline of a recorded trace: what WhatIfTrace reads
// from one (each model registered with slots at time 0 and loaded in 1 s;
// requests arriving at the given times, to the given models, each holding
// its slot for hold), with every grant at arrival. It is not a trace core
// would write; whatIfRecord turns it into one.
func skeleton(t *testing.T, slots int, models []string, arrivals []int64, hold int64) string {
	t.Helper()
	var b bytes.Buffer
	rec := func(r core.Record) {
		x, err := core.MarshalRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(x)
	}
	tk := core.Ticket(0)
	for k, id := range models {
		tk++
		cfg := &core.Config{Task: "tts", Engine: "fixture", Checkpoint: "ck", Options: "{}", Slots: slots, MemoryMB: 100}
		rec(core.EventRecord(core.Event{Kind: core.EvSubmitManager, Model: id, Op: core.OpApply, Config: cfg,
			Timeout: core.NoTimeout}, tk))
		rec(core.EffectRecordOf(0, id, core.Effect{Kind: core.EfStartLoad, Job: core.Job(k + 1), Config: cfg}))
		rec(core.EventRecord(core.Event{Kind: core.EvLoadDone, Now: 1000 * ms, Job: core.Job(k + 1), Capacity: slots}, 0))
	}
	for k, at := range arrivals {
		tk++
		id := models[k%len(models)]
		rec(core.EventRecord(core.Event{Kind: core.EvSubmitRequest, Now: at, Model: id, Timeout: core.NoTimeout}, tk))
		rec(core.EffectRecordOf(at, id, core.Effect{Kind: core.EfGrant, Ticket: tk}))
		rec(core.EventRecord(core.Event{Kind: core.EvRelease, Now: at + hold, Ticket: tk}, 0))
	}
	return b.String()
}

// whatIfRecord returns the trace core writes for a skeleton under opts:
// a recorded trace, which ReplayTrace replays exactly.
func whatIfRecord(t *testing.T, sk string, opts core.Options) string {
	t.Helper()
	var out bytes.Buffer
	if _, err := WhatIfTrace(strings.NewReader(sk), opts, WhatIf{Record: &out}); err != nil {
		t.Fatal(err)
	}
	rep, err := ReplayTrace(bytes.NewReader(out.Bytes()), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged != nil {
		t.Fatalf("the what-if's own trace diverged at line %d: %s", rep.Diverged.Line, rep.Diverged.Event)
	}
	return out.String()
}

func whatIf(t *testing.T, trace string, opts core.Options, w WhatIf) map[string]ReplayModel {
	t.Helper()
	rep, err := WhatIfTrace(strings.NewReader(trace), opts, w)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ReplayModel{}
	for _, m := range rep.Models {
		out[m.Model] = m
	}
	return out
}

func exact(t *testing.T, trace string, opts core.Options) map[string]ReplayModel {
	t.Helper()
	rep, err := ReplayTrace(strings.NewReader(trace), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged != nil {
		t.Fatalf("diverged at line %d", rep.Diverged.Line)
	}
	out := map[string]ReplayModel{}
	for _, m := range rep.Models {
		out[m.Model] = m
	}
	return out
}

// burst returns n arrival times, every apart, from 5 s on: after the
// skeleton's 1 s load and, under a --slots 4 what-if, its three 1 s clones
// (a clone costs what the model's load did), so the burst meets a
// published pool.
func burst(n int, every int64) []int64 {
	var out []int64
	for k := range n {
		out = append(out, 5000*ms+int64(k)*every)
	}
	return out
}

// TestWhatIfSameConfigurationReproduces: replayed under the configuration
// it was recorded with, a trace's what-if has exactly the recorded waits,
// refusals and loads.
func TestWhatIfSameConfigurationReproduces(t *testing.T) {
	opts := core.Options{MaxLoadedModels: 1}
	trace := whatIfRecord(t, skeleton(t, 1, []string{"a", "b"}, burst(12, 600*ms), 500*ms), opts)
	rec, got := exact(t, trace, opts), whatIf(t, trace, opts, WhatIf{})
	for id, r := range rec {
		g := got[id]
		if g.Requests != r.Requests || g.Granted != r.Granted || g.Busy != r.Busy || g.Loads != r.Loads ||
			g.WaitP50 != r.WaitP50 || g.WaitP99 != r.WaitP99 || g.WaitMax != r.WaitMax {
			t.Fatalf("%s: recorded %+v, what-if under the same configuration %+v", id, r, g)
		}
	}
	if rec["a"].WaitP99 == 0 || rec["a"].Loads < 2 {
		t.Fatalf("the recorded trace has no queueing or no reloads to reproduce: %+v", rec["a"])
	}
}

// TestWhatIfSlots: more slots per model shorten the waits of a burst that
// queued on one slot; the same number of requests is granted.
func TestWhatIfSlots(t *testing.T) {
	opts := core.Options{}
	trace := whatIfRecord(t, skeleton(t, 1, []string{"a"}, burst(12, 100*ms), 500*ms), opts)
	before, after := whatIf(t, trace, opts, WhatIf{}), whatIf(t, trace, opts, WhatIf{Slots: 4})
	b, a := before["a"], after["a"]
	t.Logf("1 slot: p50 %s p99 %s; 4 slots: p50 %s p99 %s", b.WaitP50, b.WaitP99, a.WaitP50, a.WaitP99)
	if a.Granted != b.Granted || a.Granted != 12 {
		t.Fatalf("granted %d with 4 slots, %d with 1", a.Granted, b.Granted)
	}
	if a.WaitP99 >= b.WaitP99 || a.WaitP50 > b.WaitP50 {
		t.Fatalf("4 slots did not shorten the waits: %+v vs %+v", a, b)
	}
	if f := whatIf(t, trace, opts, WhatIf{Slots: 1})["a"]; f.Granted != b.Granted || f.WaitP50 != b.WaitP50 ||
		f.WaitP99 != b.WaitP99 || f.WaitMax != b.WaitMax || f.Loads != b.Loads {
		fewer := f
		t.Fatalf("--slots 1 on a 1-slot trace changed the figures: %+v vs %+v", fewer, b)
	}
}

// TestWhatIfSlotsCloneCost: a trace recorded with one slot has no clones;
// under --slots 2 the pool is published only once its second session is
// cloned, and that clone costs what the model's recorded load did (every
// engine's Clone opens a session as its load does). A request that arrived
// during the cold load waits for both: with free clones it was granted a
// whole load earlier than the real server grants it.
func TestWhatIfSlotsCloneCost(t *testing.T) {
	opts := core.Options{}
	trace := whatIfRecord(t, skeleton(t, 1, []string{"a"}, []int64{100 * ms}, 500*ms), opts)
	if one := whatIf(t, trace, opts, WhatIf{})["a"]; one.WaitMax != 900*time.Millisecond {
		t.Fatalf("1 slot: the request arrived at 100 ms into a 1 s load, waited %s, want 900ms", one.WaitMax)
	}
	two := whatIf(t, trace, opts, WhatIf{Slots: 2})["a"]
	if two.Granted != 1 || two.WaitMax != 1900*time.Millisecond {
		t.Fatalf("--slots 2: granted %d after %s, want 1 after 1.9s (1 s load, then a 1 s clone)", two.Granted, two.WaitMax)
	}
	var rec bytes.Buffer
	if _, err := WhatIfTrace(strings.NewReader(trace), opts, WhatIf{Slots: 2, Record: &rec}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.String(), `"ev":"CloneDone","t":2000000000`) {
		t.Fatalf("the what-if's clone did not end at 2 s:\n%s", rec.String())
	}
}

// TestWhatIfResidency: two models taking turns, recorded with both
// resident; with room for one (--max-loaded-models 1, or a memory budget
// of one model) every turn reloads, and the waits grow.
func TestWhatIfResidency(t *testing.T) {
	opts := core.Options{}
	trace := whatIfRecord(t, skeleton(t, 2, []string{"a", "b"}, burst(12, 600*ms), 200*ms), opts)
	base := whatIf(t, trace, opts, WhatIf{})
	one, budget := 1, int64(100)
	for name, w := range map[string]WhatIf{"max-loaded-models 1": {MaxLoadedModels: &one}, "memory-budget 100": {MemoryBudgetMB: &budget}} {
		got := whatIf(t, trace, opts, w)
		for _, id := range []string{"a", "b"} {
			b, g := base[id], got[id]
			t.Logf("%s %s: loads %d -> %d, p99 %s -> %s", name, id, b.Loads, g.Loads, b.WaitP99, g.WaitP99)
			if g.Loads <= b.Loads || g.WaitP99 <= b.WaitP99 {
				t.Fatalf("%s, model %s: loads %d -> %d, p99 %s -> %s: want more loads and longer waits", name, id,
					b.Loads, g.Loads, b.WaitP99, g.WaitP99)
			}
		}
	}
}

// TestWhatIfAdmissionTimeout: a burst queued on one slot waits up to
// seconds; with a 300 ms admission timeout the long waiters are refused
// (503 server_busy) instead, and no grant waited longer than that.
func TestWhatIfAdmissionTimeout(t *testing.T) {
	opts := core.Options{}
	trace := whatIfRecord(t, skeleton(t, 1, []string{"a"}, burst(12, 100*ms), 500*ms), opts)
	limit := 300 * time.Millisecond
	b, a := whatIf(t, trace, opts, WhatIf{})["a"], whatIf(t, trace, opts, WhatIf{AdmissionTimeout: &limit})["a"]
	t.Logf("no timeout: busy %d max wait %s; 300 ms: busy %d max wait %s", b.Busy, b.WaitMax, a.Busy, a.WaitMax)
	if b.Busy != 0 || a.Busy == 0 || a.Busy+a.Granted != 12 || a.WaitMax > limit {
		t.Fatalf("without a timeout %+v, with 300 ms %+v", b, a)
	}
}

// TestWhatIfCommand: `sluice sim --replay TRACE --slots 4` prints the
// recorded configuration's figures and the what-if's; a what-if flag
// without --replay is a usage error.
func TestWhatIfCommand(t *testing.T) {
	trace := whatIfRecord(t, skeleton(t, 1, []string{"a"}, burst(12, 100*ms), 500*ms), core.Options{})
	p := t.TempDir() + "/t.ndjson"
	if err := os.WriteFile(p, []byte(trace), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := Main([]string{"--replay", p, "--slots", "4", "--admission-timeout", "10s"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s%s", rc, out.String(), errb.String())
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"as recorded (virtual time):", "what if --slots 4 --admission-timeout 10s:", "wait p99"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	if before, after := strings.Fields(rows[3]), strings.Fields(rows[len(rows)-1]); before[0] != "a" || after[0] != "a" ||
		before[6] != "4s" || after[6] != "200ms" {
		t.Fatalf("p99 before %q, after %q", rows[3], rows[len(rows)-1])
	}
	errb.Reset()
	if rc := Main([]string{"--slots", "4"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "need --replay") {
		t.Fatalf("--slots without --replay: rc %d, %s", rc, errb.String())
	}
	if rc := Main([]string{"--replay", p, "--slots", "0"}, &out, &errb); rc != 2 {
		t.Fatalf("--slots 0: rc %d", rc)
	}
}
