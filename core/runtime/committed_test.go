package runtime

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

// A refused manager tells whether it committed a config version
// (Error.Committed, from core.Effect.Committed), so the persistent
// registry records exactly what committed (CONTRACT.md
// persist.committed-only) without comparing versions around the call.
func TestRefusalTellsWhetherItCommitted(t *testing.T) {
	e := newEnv(t, core.Options{})
	bg := context.Background()
	for _, tc := range []struct {
		name      string
		id        string
		spec      ModelSpec
		committed bool
	}{
		{"registration whose first load fails", "f", spec(1, `{"fail_load":true}`), true},
		{"invalid spec", "z", spec(0, `{}`), false},
		{"reconfigure whose load fails after its commit", "a", spec(1, `{"fail_load":true}`), true},
		{"reconfigure whose probe fails before its commit", "a", spec(2, `{"fail_probe":true}`), false},
	} {
		if tc.id == "a" {
			if _, err := e.rt.StatusOf("a"); err != nil {
				e.apply("a", spec(1, `{}`))
			}
		}
		_, err := e.rt.Apply(bg, tc.id, tc.spec)
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if got := Committed(err); got != tc.committed {
			t.Errorf("%s: Committed %v, want %v (%v)", tc.name, got, tc.committed, err)
		}
	}
	if _, err := e.rt.Load(bg, "nope"); Committed(err) {
		t.Errorf("a load of an unknown ID committed: %v", err)
	}
}
