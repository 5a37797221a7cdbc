//go:build sluice_mutants

package sim

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// TestMutantsFound plants every core mutant and requires a campaign to find
// it, both with core's invariants and with the simulator's own oracle and
// watchdog alone; the failing seed must replay and minimize.
func TestMutantsFound(t *testing.T) {
	for _, noInv := range []bool{false, true} {
		rs, err := Mutants(Options{Steps: 3000, NoInvariants: noInv}, 1, 200, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		WriteMutants(&b, 1, rs)
		t.Logf("no invariants=%v\n%s", noInv, b.String())
		for _, r := range rs {
			if !r.Caught {
				t.Errorf("mutant %s survived (no invariants=%v)", r.Mutant, noInv)
				continue
			}
			if noInv {
				continue
			}
			var tr, mt bytes.Buffer
			inv, err := Investigate(r.Options.withSeed(r.Failure.Seed), r.Failure, &tr, &mt, 20*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", r.Mutant, err)
			}
			if inv.Note != "" || inv.Kept == 0 || inv.Kept > inv.Recorded || tr.Len() == 0 || mt.Len() == 0 {
				t.Fatalf("%s: investigation %+v", r.Mutant, inv)
			}
			last := inv.Minimized[len(inv.Minimized)-1]
			if !strings.Contains(strings.Join(inv.Minimized, "\n"), "!! "+r.Failure.Check) {
				t.Fatalf("%s: minimized list does not end in %s: %s", r.Mutant, r.Failure.Check, last)
			}
			t.Logf("%s: %s minimized to %d of %d events", r.Mutant, r.Failure.Check, inv.Kept, inv.Recorded)
		}
	}
}

// TestMutantTableFormat checks the lines `make mutants` reads.
func TestMutantTableFormat(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"--mutant", "all", "--seeds", "100", "--steps", "3000"}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(core.AllMutants())+1 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	for k, mu := range core.AllMutants() {
		if !strings.HasPrefix(lines[k], "sim: mutant "+mu.String()+" caught seed=") || !strings.Contains(lines[k], " check=") {
			t.Fatalf("line %q", lines[k])
		}
	}
	if want := "sim: mutants caught " + strconv.Itoa(len(core.AllMutants())) + "/" + strconv.Itoa(len(core.AllMutants())); lines[len(lines)-1] != want {
		t.Fatalf("last line %q, want %q", lines[len(lines)-1], want)
	}
}

// TestStallReported: a machine left with a queued request that nothing can
// wake is a stall, explained link by link.
func TestStallReported(t *testing.T) {
	m, err := core.New(core.Options{Mutants: core.MutLostWakeup})
	if err != nil {
		t.Fatal(err)
	}
	o := newOracle(m)
	c := &core.Config{Task: "tts", Engine: "fixture", Checkpoint: "ck", Options: "{}", Slots: 1, MemoryMB: 10,
		AdmissionTimeout: core.NoTimeout}
	var job core.Job
	step := func(ev core.Event) core.Ticket {
		o.pre(&ev)
		tk, ok, err := apply(m, &ev)
		o.post(&ev, tk, ok, err, m.Effects())
		for _, e := range m.Effects() {
			if e.Kind == core.EfStartLoad {
				job = e.Job
			}
		}
		m.Advance()
		return tk
	}
	step(core.Event{Kind: core.EvSubmitManager, Now: 1, Model: "a", Op: core.OpApply, Config: c, Timeout: core.NoTimeout})
	step(core.Event{Kind: core.EvLoadDone, Now: 2, Job: job, Capacity: 1, Failed: true})
	step(core.Event{Kind: core.EvSubmitRequest, Now: 3, Model: "a", Timeout: core.NoTimeout})
	step(core.Event{Kind: core.EvSubmitRequest, Now: 4, Model: "a", Timeout: core.NoTimeout})
	step(core.Event{Kind: core.EvLoadDone, Now: 5, Job: job, Capacity: 1, Failed: true})
	h, _ := m.Lookup("a")
	ok, v := stuck(m, h, 10)
	if !ok {
		t.Fatalf("not stuck: %+v", v)
	}
	chain := strings.Join(explain(m, &o, 10, h), "\n")
	for _, want := range []string{"queue[0] T", "nothing in flight can wake it"} {
		if !strings.Contains(chain, want) {
			t.Fatalf("chain lacks %q:\n%s", want, chain)
		}
	}
	t.Log(chain)
}

// TestReplayCommand: the printed replay command reproduces the failure.
func TestReplayCommand(t *testing.T) {
	var out, errs bytes.Buffer
	code := Main([]string{"--mutant", "lifo", "--seeds", "50", "--steps", "3000", "--minimize", "5s",
		"--trace", t.TempDir() + "/x.ndjson"}, &out, &errs)
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "replay: ") {
			line = strings.TrimPrefix(l, "replay: sluice sim ")
		}
	}
	if line == "" {
		t.Fatalf("no replay line:\n%s", out.String())
	}
	var again bytes.Buffer
	if code := Main(append(strings.Fields(line), "--minimize", "0"), &again, &errs); code != 1 {
		t.Fatalf("replay %q exit %d\n%s", line, code, again.String())
	}
	first := strings.SplitN(out.String(), "\n", 2)[0]
	if !strings.Contains(again.String(), strings.TrimPrefix(first, "FAIL ")) {
		t.Fatalf("replay %q did not reproduce %q:\n%s", line, first, again.String())
	}
}

func (o Options) withSeed(seed uint64) Options {
	o.Seed = seed
	return o
}
