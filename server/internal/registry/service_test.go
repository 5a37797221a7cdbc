package registry

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core/runtime"
)

// A record never goes backwards: Record skips a model whose recorded
// config_version is ahead of the runtime's, by one or by more (CONTRACT.md
// persist.version-continues; edgemutants record-goes-backwards), and
// records it again once the runtime catches up.
func TestRecordNeverGoesBackwards(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Engines: backends.Registry{fixture.Name: fixture.New()}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	s, _ := openT(t, t.TempDir())
	defer s.Close()
	g := New(rt, s, slog.New(slog.DiscardHandler))
	spec := func(q int) runtime.ModelSpec {
		return runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1, Options: json.RawMessage(`{}`), MaxQueue: q}
	}
	ctx := context.Background()
	for q := range 3 { // v1, v2, v3
		if _, err := rt.Apply(ctx, "m", spec(q)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ahead := range []uint64{4, 5} { // one ahead, two ahead
		s.mu.Lock()
		s.put(Model{ID: "m", ConfigVersion: ahead, Loaded: true, Task: "tts", Engine: fixture.Name, Options: json.RawMessage(`{}`), Slots: 1, MaxQueue: 9})
		s.mu.Unlock()
		if err := g.Record("m"); err != nil {
			t.Fatal(err)
		}
		if m, _ := s.State().Get("m"); m.ConfigVersion != ahead || m.MaxQueue != 9 {
			t.Fatalf("record at v%d overwritten by the runtime's v3: %+v", ahead, m)
		}
	}
	if _, err := rt.Apply(ctx, "m", spec(7)); err != nil { // v4
		t.Fatal(err)
	}
	if _, err := rt.Apply(ctx, "m", spec(8)); err != nil { // v5
		t.Fatal(err)
	}
	if _, err := rt.Apply(ctx, "m", spec(6)); err != nil { // v6
		t.Fatal(err)
	}
	if err := g.Record("m"); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.State().Get("m"); m.ConfigVersion != 6 || m.MaxQueue != 6 {
		t.Fatalf("the runtime's v6 not recorded: %+v", m)
	}
}

// TestVersionNeverReused: a config_version the runtime has shown is never
// given to another config, whatever fails (CONTRACT.md
// persist.version-continues, persist.durable-before-200). With the disk
// full, a reconfiguration is refused before it goes live; when only the
// record after the commit fails, the change was announced first and a
// restart brings it back at its version. On the old code the change went
// live as version 2 with the disk full, the restart brought back version
// 1, and the next change was version 2 again, for another config.
func TestVersionNeverReused(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	spec := func(q int, opts string) runtime.ModelSpec {
		return runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1, Options: json.RawMessage(opts), MaxQueue: q}
	}
	seen := map[uint64]int{} // config_version -> max_queue, as the runtime showed them
	note := func(rt *runtime.Runtime, when string) {
		t.Helper()
		cfg, st, err := rt.ConfigOf("m")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if q, ok := seen[st.ConfigVersion]; ok && q != cfg.MaxQueue {
			t.Fatalf("%s: config_version %d given to max_queue %d, shown before with max_queue %d", when, st.ConfigVersion, cfg.MaxQueue, q)
		}
		seen[st.ConfigVersion] = cfg.MaxQueue
	}
	start, stop := restarts(t, dir, backends.Registry{fixture.Name: fixture.New()})

	rt, s, g := start()
	if _, err := g.Apply(ctx, "m", spec(1, `{}`)); err != nil {
		t.Fatal(err)
	}
	note(rt, "v1")
	full := errors.New("no space left on device")
	s.SetWriteHook(func(*os.File, []byte) error { return full })
	if _, err := g.Apply(ctx, "m", spec(2, `{}`)); err == nil {
		t.Fatal("a change answered success with the disk full")
	}
	note(rt, "disk full")
	if _, st, _ := rt.ConfigOf("m"); st.ConfigVersion != 1 {
		t.Fatalf("with the disk full the change went live as version %d", st.ConfigVersion)
	}
	stop(rt, s)

	rt, s, g = start()
	note(rt, "restart 1")
	if _, err := g.Apply(ctx, "m", spec(3, `{}`)); err != nil {
		t.Fatal(err)
	}
	note(rt, "after restart 1")
	// The disk fills after the announcement: the change commits (its load
	// fails, so it is recorded unloaded), and that record fails.
	writes := 0
	s.SetWriteHook(func(f *os.File, b []byte) error {
		if writes++; writes > 1 {
			return full
		}
		return writeAll(f, b)
	})
	if _, err := g.Apply(ctx, "m", spec(4, `{"fail_load":true}`)); err == nil || !runtime.Committed(err) {
		t.Fatalf("a failing load: %v", err)
	}
	note(rt, "record failed")
	stop(rt, s)

	rt, s, g = start()
	defer stop(rt, s)
	note(rt, "restart 2")
	if _, err := g.Apply(ctx, "m", spec(5, `{}`)); err != nil {
		t.Fatal(err)
	}
	note(rt, "after restart 2")
	if _, st, _ := rt.ConfigOf("m"); st.ConfigVersion != 4 {
		t.Fatalf("config_version %d after the last change, want 4 (1, 2, 3 and 4 each given once)", st.ConfigVersion)
	}
}

// TestAnnouncedPutWritesOnce: a PUT that commits as announced costs one
// durable write, its intent, as a PUT cost before intents; an identical
// PUT writes nothing; a PUT the runtime refuses (here the engine's check,
// which runs before the announcement) writes nothing, and the state is
// unchanged.
func TestAnnouncedPutWritesOnce(t *testing.T) {
	rt, err := runtime.New(runtime.Options{Engines: backends.Registry{fixture.Name: fixture.New()}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer rt.Shutdown(ctx)
	s, _ := openT(t, t.TempDir())
	defer s.Close()
	g := New(rt, s, slog.New(slog.DiscardHandler))
	writes := 0
	s.SetWriteHook(func(f *os.File, b []byte) error { writes++; return writeAll(f, b) })
	spec := runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1, Options: json.RawMessage(`{"infer_ms":0, "chunks": 1}`)}
	for k, want := range []int{1, 0, 1, 1} { // a registration, the same spec, two reconfigurations
		writes = 0
		spec.MaxQueue = max(0, k-1)
		if _, err := g.Apply(ctx, "m", spec); err != nil {
			t.Fatal(err)
		}
		if writes != want {
			t.Errorf("PUT %d: %d writes, want %d", k, writes, want)
		}
	}
	spec.Options = json.RawMessage(`{"no_such_option":1}`) // the fixture refuses it before any commit
	writes = 0
	if _, err := g.Apply(ctx, "m", spec); err == nil || runtime.Committed(err) {
		t.Fatalf("a refused spec: %v", err)
	}
	if m, _ := s.State().Get("m"); m.ConfigVersion != 3 || len(s.intents) != 0 || writes != 0 {
		t.Fatalf("after a refused PUT: %+v, %d intents, %d writes", m, len(s.intents), writes)
	}
}

// A model's aliases are recorded with its committed config and restored
// with it; a state file written before aliases existed (no aliases key)
// stays readable (CONTRACT.md names.alias-resolve).
func TestAliasesRecordedAndRestored(t *testing.T) {
	newRT := func() *runtime.Runtime {
		rt, err := runtime.New(runtime.Options{Engines: backends.Registry{fixture.Name: fixture.New()}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	dir := t.TempDir()
	ctx := context.Background()
	rt := newRT()
	s, _ := openT(t, dir)
	g := New(rt, s, slog.New(slog.DiscardHandler))
	spec := runtime.ModelSpec{Engine: fixture.Name, Task: "asr", Slots: 1, Aliases: []string{"whisper-1", "gpt-4o-transcribe"}}
	if _, err := g.Apply(ctx, "asr", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Apply(ctx, "old", runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1}); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.State().Get("asr"); strings.Join(m.Aliases, ",") != "gpt-4o-transcribe,whisper-1" {
		t.Fatalf("recorded aliases %q", m.Aliases)
	}
	rt.Shutdown(ctx)
	s.Close()

	rt = newRT()
	defer rt.Shutdown(ctx)
	s, _ = openT(t, dir)
	defer s.Close()
	if _, err := New(rt, s, slog.New(slog.DiscardHandler)).Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if id, ok := rt.Resolve("whisper-1"); !ok || id != "asr" {
		t.Errorf("restored alias resolves to %q %v", id, ok)
	}
	if st, _ := rt.StatusOf("asr"); st.ConfigVersion != 1 {
		t.Errorf("restored at version %d", st.ConfigVersion)
	}
	b, err := EncodeSnapshot(State{Models: []Model{{ID: "m", ConfigVersion: 2, Task: "tts", Engine: fixture.Name, Options: json.RawMessage(`{}`), Slots: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "aliases") {
		t.Errorf("a model without aliases writes the key: %s", b)
	}
	if st, err := parseSnapshot(b); err != nil || len(st.Models[0].Aliases) != 0 {
		t.Errorf("a snapshot without aliases: %+v %v", st, err)
	}
}

// restarts returns start, which opens dir's store and restores it into a
// new runtime serving engines (a server's start), and stop, which closes
// both (its exit).
func restarts(t *testing.T, dir string, engines backends.Registry) (start func() (*runtime.Runtime, *Store, *Registry), stop func(*runtime.Runtime, *Store)) {
	ctx := context.Background()
	start = func() (*runtime.Runtime, *Store, *Registry) {
		t.Helper()
		rt, err := runtime.New(runtime.Options{Engines: engines, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := openT(t, dir)
		g := New(rt, s, slog.New(slog.DiscardHandler))
		if _, err := g.Restore(ctx); err != nil {
			t.Fatal(err)
		}
		return rt, s, g
	}
	stop = func(rt *runtime.Runtime, s *Store) {
		_ = s.Close()
		_ = rt.Shutdown(ctx)
	}
	return start, stop
}
