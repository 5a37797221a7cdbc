package server

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/server/internal/registry"
)

// countedEngine is the fixture under another name, counting the spec
// checks the runtime asks of it.
type countedEngine struct {
	*fixture.Engine
	checks, validates atomic.Int64
}

const countedName = "counted"

func (e *countedEngine) Name() string { return countedName }

func (e *countedEngine) Check(spec backends.Spec) (int64, error) {
	e.checks.Add(1)
	return e.Engine.Check(spec)
}

// Voices gives the fixture two voices, for a voice map to name.
func (e *countedEngine) Voices(backends.Spec) ([]backends.Voice, error) {
	return []backends.Voice{{ID: "one", Default: true}, {ID: "two"}}, nil
}

func (e *countedEngine) Validate(spec backends.Spec) error {
	e.validates.Add(1)
	return e.Engine.Validate(spec)
}

// A PUT checks its spec once: the validator and the engine's resolve of
// its options (Engine.Check) run once per registration or reconfigure,
// with --state-dir as without it, where the registry's intent, written
// before the commit, used to run the validator a second time. A spec the
// engine refuses is checked once and writes nothing; one the validator
// refuses never reaches the engine. With --state-dir, a change that
// commits as announced is one journal record (its intent), aliases and
// voice map included, and a PUT identical to the live config writes
// nothing.
func TestPutChecksSpecOnce(t *testing.T) {
	for _, durable := range []bool{false, true} {
		name := "no-state-dir"
		if durable {
			name = "state-dir"
		}
		t.Run(name, func(t *testing.T) {
			eng := &countedEngine{Engine: fixture.New()}
			cfg := testConfig(t)
			if durable {
				cfg.StateDir = filepath.Join(t.TempDir(), "state")
			}
			ts := newServerOpts(t, cfg, Options{Engines: backends.Registry{countedName: eng}})
			var writes atomic.Int64
			if st := ts.s.reg.Store(); st != nil {
				st.SetWriteHook(func(f *os.File, b []byte) error {
					writes.Add(1)
					_, err := f.Write(b)
					return err
				})
			}
			for _, c := range []struct {
				what, spec string
				code       int
				checks     int64
				writes     int64 // with --state-dir
			}{
				{"registration", `{"engine":"counted","task":"tts"}`, 200, 1, 1},
				{"reconfigure", `{"engine":"counted","task":"tts","max_queue":3}`, 200, 1, 1},
				{"aliases", `{"engine":"counted","task":"tts","max_queue":3,"aliases":["m-alias"]}`, 200, 1, 1},
				{"voice map", `{"engine":"counted","task":"tts","max_queue":3,"aliases":["m-alias"],"voice_map":{"alloy":"two"}}`, 200, 1, 1},
				{"identical", `{"engine":"counted","task":"tts","max_queue":3,"aliases":["m-alias"],"voice_map":{"alloy":"two"}}`, 200, 1, 0},
				{"engine refuses", `{"engine":"counted","task":"tts","options":{"no_such_option":1}}`, 400, 1, 0},
				{"validator refuses", `{"engine":"counted","task":"tts","slots":17}`, 400, 0, 0},
			} {
				checks0, writes0 := eng.checks.Load(), writes.Load()
				ts.must(c.code, "PUT", "/v1/models/m", c.spec)
				if got := eng.checks.Load() - checks0; got != c.checks {
					t.Errorf("%s: Engine.Check ran %d times, want %d", c.what, got, c.checks)
				}
				if want := c.writes; durable {
					if got := writes.Load() - writes0; got != want {
						t.Errorf("%s: %d writes to the state dir, want %d", c.what, got, want)
					}
				}
			}
			if n := eng.validates.Load(); n != 0 {
				t.Errorf("Engine.Validate ran %d times besides Check", n)
			}
			if !durable {
				return
			}
			st, err := registry.ReadState(cfg.StateDir)
			if err != nil {
				t.Fatal(err)
			}
			m, ok := st.Get("m")
			if !ok || m.ConfigVersion != 4 || len(m.Aliases) != 1 || m.Aliases[0] != "m-alias" || m.VoiceMap["alloy"] != "two" {
				t.Errorf("recorded %+v (found %v), want version 4 with its alias and voice map", m, ok)
			}
		})
	}
}
