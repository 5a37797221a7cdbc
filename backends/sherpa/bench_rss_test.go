package sherpa

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// rssEnv carries a spec (JSON) to a test binary re-executed to measure
// one pool's resident memory in a process of its own (rssMain).
const rssEnv = "SLUICE_SHERPA_RSS"

func init() {
	if spec := os.Getenv(rssEnv); spec != "" {
		os.Exit(rssMain(spec))
	}
}

// rssSample is what an RSS child reports (MB of VmRSS).
type rssSample struct {
	Base float64 // the library loaded, no model
	Pool float64 // the pool open, every slot warmed
}

// rssMain loads the library, reads VmRSS, opens spec's pool (spec.Slots
// sessions), runs the request on every slot at once twice (each slot's
// buffers and ONNX Runtime's arenas at their working size), reads VmRSS
// again and prints both.
func rssMain(specJSON string) int {
	var spec backends.Spec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "rss child:", err)
		return 2
	}
	if _, err := load(); err != nil {
		fmt.Fprintln(os.Stderr, "rss child:", err)
		return 2
	}
	var out rssSample
	out.Base = rssMB()
	e := New(Config{NoChild: true})
	s0, _, err := e.Open(context.Background(), spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rss child: open:", err)
		return 2
	}
	sessions := []backends.Session{s0}
	for i := 1; i < spec.Slots; i++ {
		s, err := s0.Clone(context.Background(), i)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rss child: clone:", err)
			return 2
		}
		sessions = append(sessions, s)
	}
	req := benchRequest(nil, spec.Model)
	for range 2 {
		var wg sync.WaitGroup
		errs := make(chan error, len(sessions))
		for _, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Infer(context.Background(), req, nil); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, "rss child: infer:", err)
			return 2
		}
	}
	out.Pool = rssMB()
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return 0
}

// BenchmarkRSS: each family's pool at 1, 2 and 4 slots, each in a fresh
// process (this test binary re-executed), every slot warmed by two
// requests at once: base-MB is the process with the library loaded and no
// model (the baseline), slots=N-MB the process with the pool, and MB/slot
// what each slot beyond the first adds ((4 slots - 1 slot) / 3). One
// thread per slot, as BenchmarkFamilies. make bench-sherpa; -benchtime 1x.
func BenchmarkRSS(b *testing.B) {
	root := testRoot(b)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range append(benchNames, WhisperMultiSynthetic) {
		b.Run(name, func(b *testing.B) {
			cp, err := catalogue.Load(Dir(root, name))
			if err != nil {
				b.Fatal(err)
			}
			at := map[int]rssSample{}
			for range b.N {
				for _, slots := range []int{1, 2, 4} {
					spec := backends.Spec{Model: name, Task: cp.Task, Engine: Name, Checkpoint: cp.Dir, Options: []byte(`{"oversubscribe":true}`), Slots: slots}
					js, _ := json.Marshal(spec)
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
					cmd.Env = append(os.Environ(), rssEnv+"="+string(js))
					var stderr strings.Builder
					cmd.Stderr = &stderr
					out, err := cmd.Output()
					cancel()
					if err != nil {
						b.Fatalf("%d slots: %v: %s", slots, err, stderr.String())
					}
					var s rssSample
					if err := json.Unmarshal(out[strings.LastIndex(strings.TrimSpace(string(out)), "\n")+1:], &s); err != nil {
						b.Fatalf("%d slots: %q: %v", slots, out, err)
					}
					at[slots] = s
				}
			}
			b.ReportMetric(at[1].Base, "base-MB")
			for _, n := range []int{1, 2, 4} {
				b.ReportMetric(at[n].Pool, fmt.Sprintf("slots=%d-MB", n))
			}
			b.ReportMetric((at[4].Pool-at[1].Pool)/3, "MB/slot")
		})
	}
}

// BenchmarkLanguage: the cost of a request in a language the slot has no
// recognizer for yet (the recognizer's creation, then the decode) beside
// the same request repeated (the recognizer cached) and one in the
// checkpoint's default language, in the same slot of the same run; each
// iteration opens a fresh slot. rss-new-lang-MB is the process's growth
// over the first request in the new language (one more recognizer).
func BenchmarkLanguage(b *testing.B) {
	root := testRoot(b)
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		b.Fatal(err)
	}
	e := New(Config{NoChild: true})
	for _, tc := range []struct{ name, lang string }{{SenseVoiceSynthetic, "ja"}, {WhisperMultiSynthetic, "de"}, {CanarySynthetic, "es"}} {
		b.Run(tc.name, func(b *testing.B) {
			cp, err := catalogue.Load(Dir(root, tc.name))
			if err != nil {
				b.Fatal(err)
			}
			spec := backends.Spec{Model: tc.name, Task: cp.Task, Engine: Name, Checkpoint: cp.Dir, Options: []byte(`{}`), Slots: 1}
			in, _ := json.Marshal(map[string]string{"language": tc.lang})
			var def, first, again time.Duration
			var grow float64
			timed := func(s backends.Session, r backends.Request) time.Duration {
				t0 := time.Now()
				if _, err := s.Infer(context.Background(), r, nil); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			b.ResetTimer()
			for range b.N {
				s, _, err := e.Open(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				timed(s, backends.Request{Data: wav}) // warm
				def += timed(s, backends.Request{Data: wav})
				r0 := rssMB()
				first += timed(s, backends.Request{Data: wav, Input: in})
				grow += rssMB() - r0
				again += timed(s, backends.Request{Data: wav, Input: in})
				s.Close(context.Background())
			}
			n := float64(b.N)
			b.ReportMetric(float64(def.Microseconds())/1000/n, "default-ms")
			b.ReportMetric(float64(first.Microseconds())/1000/n, "new-lang-ms")
			b.ReportMetric(float64(again.Microseconds())/1000/n, "repeat-ms")
			b.ReportMetric(first.Seconds()/again.Seconds(), "new/repeat")
			b.ReportMetric(grow/n, "rss-new-lang-MB")
		})
	}
}
