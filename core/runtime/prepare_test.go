package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

// Prepare checks a spec once (the validator, then the engine's Check) and
// ApplyPrepared commits it without checking it again, however often it
// is applied; its Config is what commits: canonical options and aliases,
// the engine's memory estimate. A spec Prepare refuses is refused as
// Apply refuses it.
func TestPrepareChecksOnce(t *testing.T) {
	eng := &checkCounter{Engine: fixture.New()}
	e := newEnv(t, core.Options{}, withEngine("counted", eng))
	ctx := context.Background()
	spec := ModelSpec{Engine: "counted", Task: "tts", Slots: 2, Options: json.RawMessage(` {"memory_mb": 7, "chunks":1}`),
		Aliases: []string{"b", "a"}}
	p, err := e.rt.Prepare("m", spec)
	if err != nil {
		t.Fatal(err)
	}
	if n := eng.checks.Load(); n != 1 {
		t.Fatalf("Prepare: Engine.Check ran %d times, want 1", n)
	}
	cfg := p.Config()
	if p.ID() != "m" || cfg.Options != `{"chunks":1,"memory_mb":7}` || cfg.Aliases != "a,b" || cfg.MemoryMB != 7 || cfg.Slots != 2 {
		t.Fatalf("prepared %q %+v", p.ID(), cfg)
	}
	for k := range 2 { // the second Apply of the same value commits nothing new
		st, err := e.rt.ApplyPrepared(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.ConfigVersion != 1 {
			t.Fatalf("apply %d: version %d", k, st.ConfigVersion)
		}
	}
	if n, v := eng.checks.Load(), eng.validates.Load(); n != 1 || v != 0 {
		t.Fatalf("after ApplyPrepared: Engine.Check ran %d times, Validate %d; want 1 and 0", n, v)
	}
	if got, _, err := e.rt.ConfigOf("m"); err != nil || got.Options != cfg.Options || got.Aliases != cfg.Aliases || got.MemoryMB != 7 {
		t.Fatalf("committed %+v (%v), prepared %+v", got, err, cfg)
	}
	// Apply is Prepare and ApplyPrepared: one check.
	spec.MaxQueue = 3
	if st, err := e.rt.Apply(ctx, "m", spec); err != nil || st.ConfigVersion != 2 {
		t.Fatalf("Apply: %+v %v", st, err)
	}
	if n := eng.checks.Load(); n != 2 {
		t.Fatalf("Apply: Engine.Check ran %d times in all, want 2", n)
	}
	bad := spec
	bad.Slots = core.MaxSlots + 1
	_, perr := e.rt.Prepare("m", bad)
	_, aerr := e.rt.Apply(ctx, "m", bad)
	if specField(perr) != FieldSlots || perr.Error() != aerr.Error() {
		t.Fatalf("Prepare refused %v, Apply %v", perr, aerr)
	}
	if n := eng.checks.Load(); n != 2 {
		t.Fatalf("a spec the validator refuses reached the engine (%d checks)", n)
	}
}

// A Prepared is this runtime's checked value: the zero one and one made
// by another runtime are refused, with nothing committed.
func TestApplyPreparedRefusesForeign(t *testing.T) {
	e := newEnv(t, core.Options{})
	other := newEnv(t, core.Options{})
	ctx := context.Background()
	p, err := other.rt.Prepare("m", ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]Prepared{"zero": {}, "another runtime's": p} {
		var re *Error
		if _, err := e.rt.ApplyPrepared(ctx, q); !errors.As(err, &re) || re.Code != core.CodeInvalid {
			t.Errorf("%s Prepared: %v, want invalid", name, err)
		}
		if e.rt.NamesTaken(q) != nil {
			t.Errorf("%s Prepared: NamesTaken answered for another runtime", name)
		}
	}
	if e.rt.Entries() != 0 {
		t.Fatalf("a foreign Prepared registered %d entries", e.rt.Entries())
	}
}

// NamesTaken answers what applying the value would be refused for now:
// an alias another model holds, a new ID that is another model's alias;
// a model's own aliases are its own.
func TestNamesTaken(t *testing.T) {
	e := newEnv(t, core.Options{})
	ctx := context.Background()
	spec := ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1, Aliases: []string{"tts-1"}}
	if _, err := e.rt.Apply(ctx, "owner", spec); err != nil {
		t.Fatal(err)
	}
	prep := func(id string, s ModelSpec) Prepared {
		t.Helper()
		p, err := e.rt.Prepare(id, s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var ne *NameError
	if err := e.rt.NamesTaken(prep("m", spec)); !errors.As(err, &ne) || ne.Name != "tts-1" || ne.Owner != "owner" {
		t.Errorf("an alias another model holds: %v", err)
	}
	if err := e.rt.NamesTaken(prep("tts-1", ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1})); !errors.As(err, &ne) || ne.Field != "model" {
		t.Errorf("a new ID that is another model's alias: %v", err)
	}
	if err := e.rt.NamesTaken(prep("owner", spec)); err != nil {
		t.Errorf("the owner's own alias: %v", err)
	}
}
