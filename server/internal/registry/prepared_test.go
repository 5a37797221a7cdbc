package registry

import (
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core/runtime"
)

// preparedRT is a runtime serving the fixture with two voices.
func preparedRT(t *testing.T) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(runtime.Options{Engines: backends.Registry{fixture.Name: voicedFixture{fixture.New()}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// The intent is the prepared config's record, aliases and voice map
// included (CONTRACT.md persist.version-continues): a change of aliases
// alone is announced like any other, so with the disk full it is refused
// before it goes live (the intent used to leave aliases out, found such a
// change identical to the live config, wrote no intent, and the change
// went live unannounced, its version reusable after a restart); and when
// only the record after the commit fails, the restart brings the change
// back at its version with its aliases and voice map.
func TestIntentHoldsAliasesAndVoiceMap(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	start, stop := restarts(t, dir, backends.Registry{fixture.Name: voicedFixture{fixture.New()}})
	spec := runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1}
	full := errors.New("no space left on device")

	rt, s, g := start()
	if _, err := g.Apply(ctx, "m", spec); err != nil {
		t.Fatal(err)
	}
	s.SetWriteHook(func(*os.File, []byte) error { return full })
	aliased := spec
	aliased.Aliases = []string{"tts-1"}
	if _, err := g.Apply(ctx, "m", aliased); err == nil || NotDurable(err) {
		t.Fatalf("an alias change with the disk full: %v, want refused before it goes live", err)
	}
	if cfg, st, _ := rt.ConfigOf("m"); st.ConfigVersion != 1 || cfg.Aliases != "" {
		t.Fatalf("with the disk full the alias change went live: version %d, aliases %q", st.ConfigVersion, cfg.Aliases)
	}

	// The disk fills after the announcement: the record after the commit
	// would fail, but the intent is the record.
	writes := 0
	s.SetWriteHook(func(f *os.File, b []byte) error {
		if writes++; writes > 1 {
			return full
		}
		return writeAll(f, b)
	})
	aliased.VoiceMap = map[string]string{"alloy": "b"}
	aliased.Options = json.RawMessage(`{"fail_load":true}`) // commits, then its load fails: recorded after the commit
	if _, err := g.Apply(ctx, "m", aliased); err == nil || !runtime.Committed(err) {
		t.Fatalf("a failing load: %v", err)
	}
	stop(rt, s)

	rt, s, _ = start()
	defer stop(rt, s)
	cfg, st, err := rt.ConfigOf("m")
	if err != nil || st.ConfigVersion != 2 || cfg.Aliases != "tts-1" || !maps.Equal(runtime.VoiceMapOf(&cfg), aliased.VoiceMap) {
		t.Fatalf("restored version %d, aliases %q, voice map %q (%v); want version 2 as the runtime showed it", st.ConfigVersion, cfg.Aliases, cfg.VoiceMap, err)
	}
	if id, ok := rt.Resolve("tts-1"); !ok || id != "m" {
		t.Errorf("the restored alias resolves to %q %v", id, ok)
	}
}

// An Apply whose alias another model holds is refused before any commit
// (names.alias-conflict) and writes no intent: one that a crash kept
// would come back at the next start beside the model that holds the
// alias.
func TestNoIntentForATakenName(t *testing.T) {
	rt := preparedRT(t)
	ctx := context.Background()
	defer rt.Shutdown(ctx)
	s, _ := openT(t, t.TempDir())
	defer s.Close()
	g := New(rt, s, slog.New(slog.DiscardHandler))
	spec := runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1}
	if _, err := g.Apply(ctx, "m", spec); err != nil {
		t.Fatal(err)
	}
	owner := spec
	owner.Aliases = []string{"tts-1"}
	if _, err := g.Apply(ctx, "owner", owner); err != nil {
		t.Fatal(err)
	}
	writes := 0
	s.SetWriteHook(func(f *os.File, b []byte) error { writes++; return writeAll(f, b) })
	for _, id := range []string{"m", "new"} { // a reconfigure, a registration
		var ne *runtime.NameError
		if _, err := g.Apply(ctx, id, owner); !errors.As(err, &ne) {
			t.Fatalf("%s: %v, want a NameError", id, err)
		}
	}
	if _, err := g.Apply(ctx, "tts-1", spec); err == nil { // a new ID that is another model's alias
		t.Fatal("an ID that is another model's alias registered")
	}
	if writes != 0 || len(s.intents) != 0 {
		t.Fatalf("refused Applies wrote %d times, %d intents pending", writes, len(s.intents))
	}
}

// A state dir written by a build whose intents left out aliases and voice
// maps restores as it did: the snapshot's record with its aliases, and an
// intent newer than it rolled forward as written (no aliases). The format
// is unchanged; this pins that such files still read the same.
func TestIntentWithoutAliasesFromEarlierBuilds(t *testing.T) {
	dir := t.TempDir()
	rec := Model{ID: "m", ConfigVersion: 3, Loaded: true, Task: "tts", Engine: fixture.Name, Options: json.RawMessage(`{}`), Slots: 1,
		AdmissionTimeoutNS: -1, Aliases: []string{"tts-1"}}
	intent := rec
	intent.ConfigVersion, intent.Aliases, intent.MaxQueue = 4, nil, 2
	other := Model{ID: "o", ConfigVersion: 1, Loaded: false, Task: "tts", Engine: fixture.Name, Options: json.RawMessage(`{}`), Slots: 1,
		AdmissionTimeoutNS: -1, Aliases: []string{"tts-2"}}
	b, err := EncodeSnapshot(State{Models: []Model{rec, other}, Intents: []Model{intent}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snapshotName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	rt := preparedRT(t)
	ctx := context.Background()
	defer rt.Shutdown(ctx)
	s, _ := openT(t, dir)
	defer s.Close()
	got, err := New(rt, s, slog.New(slog.DiscardHandler)).Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].equal(&intent) || !got[1].equal(&other) {
		t.Fatalf("restored records %+v, want the intent rolled forward as written and the other record", got)
	}
	cfg, st, err := rt.ConfigOf("m")
	if err != nil || st.ConfigVersion != 4 || cfg.Aliases != "" || cfg.MaxQueue != 2 {
		t.Fatalf("m restored at version %d, aliases %q, max_queue %d (%v)", st.ConfigVersion, cfg.Aliases, cfg.MaxQueue, err)
	}
	if id, ok := rt.Resolve("tts-2"); !ok || id != "o" {
		t.Errorf("o's alias resolves to %q %v", id, ok)
	}
	if _, ok := rt.Resolve("tts-1"); ok {
		t.Error("the alias the intent left out came back")
	}
	if ids := slices.Collect(maps.Keys(s.intents)); len(ids) != 0 {
		t.Errorf("intents pending after the start: %v", ids)
	}
}

// The registry checks no spec itself: the runtime's Prepare runs the
// validator and the engine's Check once per Apply (counted by the
// server's TestPutChecksSpecOnce), and the registry records the value
// Prepare returned. This guards the other way the validator could run
// twice: the registry calling one of its entry points directly (as its
// intent once did, through CanonicalFields). It parses this package's
// production files, so it costs milliseconds.
func TestRegistryRunsNoValidator(t *testing.T) {
	validator := []string{"Validate", "CanonicalFields", "CanonicalOptions", "CanonicalAliases", "CanonicalVoiceMap", "Check"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	prepares := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if slices.Contains(validator, sel.Sel.Name) {
				t.Errorf("%s: the registry calls %s: the spec is checked by runtime.Prepare alone", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			if sel.Sel.Name == "Prepare" {
				prepares++
			}
			return true
		})
	}
	if prepares != 1 {
		t.Errorf("the registry calls Prepare %d times, want once (in Apply)", prepares)
	}
}
