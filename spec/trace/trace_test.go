package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// TestRandomTracesAccepted: traces of the real core under random events
// are behaviours of the spec, with and without their options file.
func TestRandomTracesAccepted(t *testing.T) {
	unregisters := 0
	defer func() {
		if !t.Failed() && unregisters == 0 {
			t.Error("no random trace unregisters a model (CONTRACT.md unreg.*)")
		}
	}()
	for seed := uint64(1); seed <= 40; seed++ {
		var buf bytes.Buffer
		o, err := Generate(&buf, GenOptions{Seed: seed, Steps: 150})
		if err != nil {
			t.Fatal(err)
		}
		unregisters += bytes.Count(buf.Bytes(), []byte(`"op":"unregister"`))
		if _, err := Validate(bytes.NewReader(buf.Bytes()), &o); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if seed%4 == 0 {
			if _, err := Validate(bytes.NewReader(buf.Bytes()), nil); err != nil {
				t.Fatalf("seed %d without options: %v", seed, err)
			}
		}
	}
}

// TestTamperedTraceRejected: changing one logged effect is caught.
func TestTamperedTraceRejected(t *testing.T) {
	var buf bytes.Buffer
	o, err := Generate(&buf, GenOptions{Seed: 7, Steps: 120})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	tampered := 0
	for k, l := range lines {
		if strings.Contains(l, `"ef":"Grant"`) && strings.Contains(l, `"version":1`) {
			lines[k] = strings.Replace(l, `"version":1`, `"version":2`, 1)
			tampered++
			break
		}
	}
	for k, l := range lines {
		if tampered == 1 && strings.Contains(l, `"code":"server_busy"`) {
			lines[k] = strings.Replace(l, `"code":"server_busy"`, `"code":"cancelled"`, 1)
			break
		}
	}
	if tampered == 0 {
		t.Fatal("nothing to tamper with")
	}
	_, err = Validate(strings.NewReader(strings.Join(lines, "\n")), &o)
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("tampered trace accepted (err %v)", err)
	}
	t.Log(te)
}

// TestValidateDir writes traces and their options into a directory, as the
// runtime does, and validates them all.
func TestValidateDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := ValidateDir(dir, &bytes.Buffer{}); !errors.Is(err, ErrNoTraces) {
		t.Fatalf("empty dir: %v", err)
	}
	for _, seed := range []uint64{3, 4} {
		var buf bytes.Buffer
		o, err := Generate(&buf, GenOptions{Seed: seed, Steps: 80})
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Join(dir, "gen-"+string(rune('0'+seed)))
		if err := os.WriteFile(base+".ndjson", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if seed == 3 {
			if err := WriteOptions(base+".options.json", o); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out bytes.Buffer
	res, err := ValidateDir(dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s", out.String())
		}
	}
	if !strings.Contains(out.String(), "2 accepted, 0 rejected") {
		t.Fatalf("%s", out.String())
	}
}

// coreTrace runs evs through the real core and returns its trace.
func coreTrace(t *testing.T, o core.Options, evs []core.Event) string {
	t.Helper()
	m, err := core.New(o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	write := func(r core.Record) {
		line, err := core.MarshalRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	for _, ev := range evs {
		tk, err := m.Step(ev)
		if err != nil {
			t.Fatal(err)
		}
		write(core.EventRecord(ev, tk))
		for _, e := range m.Effects() {
			write(m.EffectRecord(ev.Now, e))
		}
		m.Advance()
	}
	return b.String()
}

// A model restored from the persistent registry (CONTRACT.md
// persist.restore) is registered unloaded at its saved version: the spec
// answers the registration at once and the next request's load carries
// that version. The same trace with the registration loading is refused.
func TestRestoredRegistration(t *testing.T) {
	cfg := &core.Config{Engine: "fx", Options: "{}", Slots: 1, MemoryMB: 10,
		AdmissionTimeout: core.NoTimeout, BaseVersion: 7, RegisterOnly: true}
	tr := coreTrace(t, core.Options{}, []core.Event{
		{Kind: core.EvSubmitManager, Now: 1, Model: "a", Op: core.OpApply, Config: cfg, Timeout: core.NoTimeout},
		{Kind: core.EvSubmitRequest, Now: 2, Model: "a", Timeout: core.NoTimeout},
	})
	if !strings.Contains(tr, `"ef":"StartLoad","t":2,"model":"a"`) || !strings.Contains(tr, `"version":7`) {
		t.Fatalf("core's trace is not the one this test is about:\n%s", tr)
	}
	o := core.Options{}
	if _, err := Validate(strings.NewReader(tr), &o); err != nil {
		t.Fatalf("restored registration refused: %v\n%s", err, tr)
	}
	loaded := strings.Replace(tr, `"register_only":true`, `"register_only":false`, 1)
	if _, err := Validate(strings.NewReader(loaded), &o); err == nil {
		t.Fatalf("a loading registration answered at once was accepted:\n%s", loaded)
	}
	renumbered := strings.Replace(tr, `"base_version":7`, `"base_version":6`, 1)
	if _, err := Validate(strings.NewReader(renumbered), &o); err == nil {
		t.Fatalf("a load at a version the registration did not restore was accepted:\n%s", renumbered)
	}
}

// A Publish record is an observation: its capacity must be the one the
// spec's state holds for the published pool.
func TestPublishCapacityChecked(t *testing.T) {
	cfg := &core.Config{Engine: "fx", Options: "{}", Slots: 2, MemoryMB: 10, AdmissionTimeout: core.NoTimeout}
	tr := coreTrace(t, core.Options{}, []core.Event{
		{Kind: core.EvSubmitManager, Now: 1, Model: "a", Op: core.OpApply, Config: cfg, Timeout: core.NoTimeout},
		{Kind: core.EvLoadDone, Now: 2, Job: 1, Capacity: 3},
		{Kind: core.EvCloneDone, Now: 3, Job: 2},
	})
	if !strings.Contains(tr, `"ef":"Publish","t":3,"model":"a","capacity":3`) {
		t.Fatalf("core's trace is not the one this test is about:\n%s", tr)
	}
	o := core.Options{}
	if _, err := Validate(strings.NewReader(tr), &o); err != nil {
		t.Fatalf("published pool refused: %v\n%s", err, tr)
	}
	bad := strings.Replace(tr, `"ef":"Publish","t":3,"model":"a","capacity":3`, `"ef":"Publish","t":3,"model":"a","capacity":2`, 1)
	_, err := Validate(strings.NewReader(bad), &o)
	if err == nil || !strings.Contains(err.Error(), "the trace's Publish says capacity 2") {
		t.Fatalf("a Publish with the wrong capacity: %v", err)
	}
}
