package registry

import (
	"context"
	"encoding/json"
	"log/slog"
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
