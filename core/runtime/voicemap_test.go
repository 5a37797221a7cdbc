package runtime

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

// voiced is the fixture with two voices.
type voiced struct{ *fixture.Engine }

func (voiced) Voices(backends.Spec) ([]backends.Voice, error) {
	return []backends.Voice{{ID: "a", Default: true}, {ID: "b"}}, nil
}

// A speech model's voice map is checked with its spec: keys OpenAI's stock
// names in lower case, values voices its engine lists, on a tts model of
// an engine that lists voices; a refusal names voice_map and changes
// nothing; an accepted map lives in the committed config (a change of it
// alone is a new version) and comes back from SpecOf (CONTRACT.md
// names.voice-map).
func TestVoiceMapChecked(t *testing.T) {
	rt, err := New(Options{Engines: backends.Registry{"voiced": voiced{fixture.New()}, fixture.Name: fixture.New()}, CheckInvariants: true, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = rt.Shutdown(ctx) })
	tts := func(engine, task string, m map[string]string) ModelSpec {
		return ModelSpec{Engine: engine, Task: task, Slots: 1, VoiceMap: m}
	}
	if _, err := rt.Apply(ctx, "m", tts("voiced", "tts", nil)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		spec ModelSpec
		want string // in the refusal
	}{
		{"unknown voice", tts("voiced", "tts", map[string]string{"alloy": "c"}), "have a, b"},
		{"not a stock name", tts("voiced", "tts", map[string]string{"robot": "a"}), "stock voice names"},
		{"upper case", tts("voiced", "tts", map[string]string{"Alloy": "a"}), "stock voice names"},
		{"empty voice", tts("voiced", "tts", map[string]string{"alloy": ""}), "1..128"},
		{"long voice", tts("voiced", "tts", map[string]string{"alloy": strings.Repeat("v", 129)}), "1..128"},
		{"control character", tts("voiced", "tts", map[string]string{"alloy": "a\n"}), "printable"},
		{"not tts", tts("voiced", "asr", map[string]string{"alloy": "a"}), "only a speech (tts) model"},
		{"no voice list", tts(fixture.Name, "tts", map[string]string{"alloy": "a"}), "does not list its voices"},
	} {
		_, err := rt.Apply(ctx, "m", c.spec)
		var se *SpecError
		if CodeOf(err) != core.CodeInvalid || !errors.As(err, &se) || se.Field != FieldVoiceMap || !strings.Contains(se.Reason, c.want) {
			t.Errorf("%s: %v; want invalid, naming voice_map, saying %q", c.name, err, c.want)
		}
	}
	if st, _ := rt.StatusOf("m"); st.ConfigVersion != 1 {
		t.Fatalf("a refused voice map changed the model: version %d", st.ConfigVersion)
	}
	want := map[string]string{"alloy": "b", "nova": "a"}
	if _, err := rt.Apply(ctx, "m", tts("voiced", "tts", want)); err != nil {
		t.Fatal(err)
	}
	cfg, st, err := rt.ConfigOf("m")
	if err != nil || st.ConfigVersion != 2 || cfg.VoiceMap != `{"alloy":"b","nova":"a"}` || !maps.Equal(SpecOf(&cfg).VoiceMap, want) {
		t.Fatalf("committed %q at version %d (%v)", cfg.VoiceMap, st.ConfigVersion, err)
	}
	if _, err := rt.Apply(ctx, "m", tts("voiced", "tts", want)); err != nil {
		t.Fatal(err)
	}
	if st, _ := rt.StatusOf("m"); st.ConfigVersion != 2 {
		t.Errorf("the same map again committed version %d", st.ConfigVersion)
	}
}
