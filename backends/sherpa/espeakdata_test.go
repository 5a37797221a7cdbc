package sherpa

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/backends/sherpa/synth"
)

// espeakChildEnv makes TestEspeakDataOutlivesCheckpoint play the child's
// part (espeakDataChild) in the process it starts.
const espeakChildEnv = "SLUICE_SHERPA_ESPEAK_CHILD"

// TestEspeakDataOutlivesCheckpoint: the espeak-ng data a process reads is
// the first espeak voice's (sherpa-onnx initializes espeak-ng once), and
// deleting that voice's checkpoint folder must not change what any voice
// answers (sherpa.matched-outputs: a conformance check's folder is
// removed when it ends, while other checks still synthesise). It needs a
// process whose first espeak voice is the one deleted, so the check runs
// in a child (this test binary running this test with espeakChildEnv
// set, which then does the child's part, espeakDataChild); the child's
// copy of the data, left in the temporary directory as the child ends,
// is then removed by the next process that makes one (here, the parent).
func TestEspeakDataOutlivesCheckpoint(t *testing.T) {
	native.SkipUnavailable(t, Available())
	native.SkipUnavailable(t, synth.Available())
	if os.Getenv(espeakChildEnv) != "" {
		espeakDataChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestEspeakDataOutlivesCheckpoint$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), espeakChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var copyDir string
	for _, line := range strings.Split(string(out), "\n") {
		if _, v, ok := strings.Cut(line, "ESPEAK-COPY "); ok {
			copyDir = strings.TrimSpace(v)
		}
	}
	if copyDir == "" || !strings.HasPrefix(filepath.Base(filepath.Dir(copyDir)), espeakCopyPrefix) {
		t.Fatalf("the child read espeak-ng data from %q, not a copy of its own:\n%s", copyDir, out)
	}
	removeStaleEspeakCopies()
	if _, err := os.Stat(copyDir); !os.IsNotExist(err) {
		t.Errorf("the ended child's copy %s is still there (%v)", copyDir, err)
	}
}

// espeakDataChild is the child's part: the first espeak voice comes
// from folder first; piper at 2 slots from folder second answers a
// reference on one slot, first is deleted, and both slots, concurrently
// and in different orders, must answer the same bytes again.
func espeakDataChild(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	for _, d := range []string{first, second} {
		if err := BuildSynthetic(d, catalogue.DefaultSources(""), 2, PiperSynthetic); err != nil {
			t.Fatal(err)
		}
	}
	e := New(Config{NoChild: true})
	open(t, e, first, PiperSynthetic, "") // the process's first espeak voice
	s := open(t, e, second, PiperSynthetic, `{"oversubscribe":true}`)
	c, err := s.Clone(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	espeakData.mu.Lock()
	fmt.Printf("ESPEAK-COPY %s\n", espeakData.dir)
	espeakData.mu.Unlock()
	var reqs []backends.Request
	for _, in := range []string{`{"text":"Hello there."}`, `{"text":"Two sentences. Here they are."}`, `{"text":"Sluice serves speech models.","speed":0.5}`} {
		reqs = append(reqs, backends.Request{Input: []byte(in)})
	}
	want := make([][]byte, len(reqs))
	for i, r := range reqs {
		o, err := s.Infer(context.Background(), r, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = o.Data
	}
	if err := os.RemoveAll(filepath.Join(first, PiperSynthetic)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for k, slot := range []backends.Session{s, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 2 * len(reqs) {
				i := (j*(k+1) + k) % len(reqs)
				o, err := slot.Infer(context.Background(), reqs[i], nil)
				if err != nil {
					t.Errorf("slot %d, request %d after the first voice's folder was deleted: %v", k, i, err)
					return
				}
				if !bytes.Equal(o.Data, want[i]) {
					t.Errorf("slot %d, request %d after the first voice's folder was deleted: %d bytes, one slot before it answered %d (other bytes)", k, i, len(o.Data), len(want[i]))
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkEspeakCopy: what the copy of the espeak-ng data costs, once
// per process at its first espeak voice, beside what that load and one
// request cost anyway: copying the synthetic checkpoints' data (904 kB)
// and Debian's whole espeak-ng-data (13 MB, every language), loading
// piper (library object, tokens, ONNX session) and one two-sentence
// request. Later loads and requests pay nothing (the path is reused).
func BenchmarkEspeakCopy(b *testing.B) {
	root := testRoot(b)
	for _, c := range []struct{ name, dir string }{
		{"copy-synthetic", filepath.Join(root, PiperSynthetic, "espeak-ng-data")},
		{"copy-debian", catalogue.DefaultSources("").EspeakData},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := os.Stat(c.dir); err != nil {
				b.Fatal(err) // both come with `make deps` and `make models`
			}
			for b.Loop() {
				tmp := b.TempDir()
				if err := os.CopyFS(filepath.Join(tmp, "d"), os.DirFS(c.dir)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(tmp)
				b.StartTimer()
			}
		})
	}
	e := New(Config{NoChild: true})
	spec := specOf(b, root, PiperSynthetic, 1, "")
	b.Run("piper-load", func(b *testing.B) {
		for b.Loop() {
			s, _, err := e.Open(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			s.Close(context.Background())
		}
	})
	b.Run("piper-request", func(b *testing.B) {
		s, _, err := e.Open(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(context.Background())
		req := benchRequest(b, PiperSynthetic)
		for b.Loop() {
			if _, err := s.Infer(context.Background(), req, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
