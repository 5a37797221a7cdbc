package sherpa_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/sherpa"
)

// TestRealModels runs when SLUICE_SHERPA_MODELS names a folder of real
// sherpa-onnx checkpoints (each a subfolder in the release layout, with a
// manifest or importable by sluice-models -import; no real weights can be
// downloaded here, so make test skips it): each loads, answers a request
// (a sentence for a voice, jfk.wav for a recognizer) with audio or a
// transcript, and answers identically at 1 and 2 slots.
func TestRealModels(t *testing.T) {
	dir := os.Getenv("SLUICE_SHERPA_MODELS")
	if dir == "" {
		t.Skip("SLUICE_SHERPA_MODELS is not set (a folder of real sherpa-onnx checkpoints)")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		t.Fatal(err)
	}
	eng := sherpa.New(sherpa.Config{})
	for _, ent := range entries {
		if !ent.IsDir() {
			continue
		}
		t.Run(ent.Name(), func(t *testing.T) {
			cdir := filepath.Join(dir, ent.Name())
			if _, err := os.Stat(filepath.Join(cdir, catalogue.ManifestName)); err != nil {
				if _, err := sherpa.Import(cdir, ent.Name(), 4); err != nil {
					t.Fatal(err)
				}
			}
			cp, err := catalogue.Load(cdir)
			if err != nil {
				t.Fatal(err)
			}
			if cp.Engine != sherpa.Name {
				t.Skipf("engine %s, not %s", cp.Engine, sherpa.Name)
			}
			req := backends.Request{Data: wav}
			if cp.Task == "tts" {
				req = backends.Request{Input: []byte(`{"text":"The quick brown fox jumps over the lazy dog."}`)}
			}
			spec := engines.SpecFor(cp.Name, cp, 1)
			spec.Options = []byte(`{"oversubscribe":true}`)
			s, _, err := eng.Open(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.Infer(context.Background(), req, nil)
			s.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if cp.Task == "tts" {
				a, err := audio.ParseWAV(out.Data)
				if err != nil || len(a.Samples) < a.Rate/2 {
					t.Fatalf("audio: %v, %d samples", err, len(a.Samples))
				}
			} else {
				var r audio.ASRResult
				if err := json.Unmarshal(out.JSON, &r); err != nil || r.Text == "" {
					t.Fatalf("transcript %s: %v", out.JSON, err)
				}
				t.Logf("%s: %q", cp.Name, r.Text)
			}
			rows, err := engines.Matched(context.Background(), eng, spec, cp.Name, []backends.Request{req}, []int{2}, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.Status() != "ok" {
					t.Errorf("%d slots: %s", r.Slots, r.Status())
				}
			}
		})
	}
}
