package registry

import (
	"context"
	"encoding/json"
	"log/slog"
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
