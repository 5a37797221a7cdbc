package registry

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core/runtime"
)

// voicedFixture is the fixture with two voices, so a voice map can name
// them.
type voicedFixture struct{ *fixture.Engine }

func (voicedFixture) Voices(backends.Spec) ([]backends.Voice, error) {
	return []backends.Voice{{ID: "a", Default: true}, {ID: "b"}}, nil
}

// A speech model's voice map is recorded with its committed config and
// restored with it; a state file without one stays readable and writes no
// key (CONTRACT.md names.voice-map).
func TestVoiceMapRecordedAndRestored(t *testing.T) {
	newRT := func() *runtime.Runtime {
		rt, err := runtime.New(runtime.Options{Engines: backends.Registry{fixture.Name: voicedFixture{fixture.New()}}, Logger: slog.New(slog.DiscardHandler)})
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
	want := map[string]string{"alloy": "b", "nova": "a"}
	if _, err := g.Apply(ctx, "tts", runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1, VoiceMap: want}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Apply(ctx, "plain", runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1}); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.State().Get("tts"); !maps.Equal(m.VoiceMap, want) {
		t.Fatalf("recorded voice map %v", m.VoiceMap)
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
	cfg, st, err := rt.ConfigOf("tts")
	if err != nil || st.ConfigVersion != 1 || !maps.Equal(runtime.VoiceMapOf(&cfg), want) {
		t.Errorf("restored: voice map %q at version %d (%v)", cfg.VoiceMap, st.ConfigVersion, err)
	}
	if m, _ := s.State().Get("plain"); m.VoiceMap != nil {
		t.Errorf("a model without a voice map recorded %v", m.VoiceMap)
	}
	b, err := EncodeSnapshot(s.State())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), "voice_map") != 1 {
		t.Errorf("want one voice_map key (the tts model's): %s", b)
	}
}
