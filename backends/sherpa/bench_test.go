package sherpa

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
)

// benchNames are the checkpoints benchmarked: one per family.
var benchNames = []string{PiperSynthetic, KokoroSynthetic, KokoroMultiSynthetic, KittenSynthetic, MatchaSynthetic, MatchaVocosSynthetic, NemoCTCSynthetic, TransducerSynthetic, ParakeetSynthetic, SenseVoiceSynthetic,
	ParaformerSynthetic, WhisperSynthetic, MoonshineSynthetic, MoonshineV2Synthetic, CanarySynthetic, StreamingSynthetic, OnlineNemoCTCSynthetic, OnlineParaformerSynthetic, DiarizationSynthetic}

// benchRequest is each family's request in the benchmarks: a two-sentence
// text for TTS, jfk.wav (11 s) for the recognizers.
func benchRequest(b testing.TB, name string) backends.Request {
	if families[synthetic[name].opts["family"].(string)].task == "tts" {
		return backends.Request{Input: []byte(`{"text":"The quick brown fox jumps over the lazy dog. Sluice serves speech models."}`)}
	}
	wav, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		b.Fatal(err)
	}
	return backends.Request{Data: wav}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rssMB() float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			for _, f := range strings.Fields(v) {
				if n, err := parseFloat(f); err == nil {
					kb = n
					break
				}
			}
			return kb / 1024
		}
	}
	return 0
}

func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

// BenchmarkFamilies: requests/s, CPU per request and resident memory of
// each synthetic checkpoint at 1, 2 and 4 slots with as many concurrent
// clients (each on its own slot), one thread per slot (make bench-sherpa).
// rss-MB is the process's after the line; rss-delta-MB its growth over
// the line (the pool's sessions and their buffers).
func BenchmarkFamilies(b *testing.B) {
	root := testRoot(b)
	oneSlot := map[string]float64{}
	e := New(Config{})
	for _, name := range benchNames {
		req := benchRequest(b, name)
		for _, slots := range []int{1, 2, 4} {
			b.Run(name+"/slots="+itoa(slots), func(b *testing.B) {
				before := rssMB()
				cp, err := catalogue.Load(Dir(root, name))
				if err != nil {
					b.Fatal(err)
				}
				spec := backends.Spec{Model: name, Task: cp.Task, Engine: Name, Checkpoint: cp.Dir, Options: []byte(`{"oversubscribe":true}`), Slots: slots}
				s0, _, err := e.Open(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				sessions := []backends.Session{s0}
				for i := 1; i < slots; i++ {
					s, err := s0.Clone(context.Background(), i)
					if err != nil {
						b.Fatal(err)
					}
					sessions = append(sessions, s)
				}
				defer func() {
					for _, s := range sessions {
						s.Close(context.Background())
					}
				}()
				for _, s := range sessions { // warm every slot
					if _, err := s.Infer(context.Background(), req, nil); err != nil {
						b.Fatal(err)
					}
				}
				jobs := make(chan struct{}, b.N)
				for range b.N {
					jobs <- struct{}{}
				}
				close(jobs)
				cpu0, t0 := cpuTime(), time.Now()
				b.ResetTimer()
				var wg sync.WaitGroup
				for _, s := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range jobs {
							if _, err := s.Infer(context.Background(), req, nil); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				el := time.Since(t0)
				rate := float64(b.N) / el.Seconds()
				b.ReportMetric(rate, "req/s")
				// The ratio to this run's 1-slot line (2x is the 2-core
				// ceiling); the benchmark runs the 1-slot line first.
				if slots == 1 {
					oneSlot[name] = rate
				} else if base := oneSlot[name]; base > 0 {
					b.ReportMetric(rate/base, "x-1-slot")
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/req")
				after := rssMB()
				b.ReportMetric(after, "rss-MB")
				b.ReportMetric(after-before, "rss-delta-MB")
			})
		}
	}
}

// BenchmarkLoad: one load of each checkpoint in this process (the Go
// checks and the library's create, then its destroy) beside one load in
// a child process (the process start, the same load and one small
// request: what the first load of a checkpoint costs on top).
func BenchmarkLoad(b *testing.B) {
	root := testRoot(b)
	for _, name := range benchNames {
		cp, err := catalogue.Load(Dir(root, name))
		if err != nil {
			b.Fatal(err)
		}
		spec := backends.Spec{Model: name, Task: cp.Task, Engine: Name, Checkpoint: cp.Dir, Options: []byte(`{}`), Slots: 1}
		b.Run(name+"/in-process", func(b *testing.B) {
			e := New(Config{NoChild: true})
			for range b.N {
				s, _, err := e.Open(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				s.Close(context.Background())
			}
		})
		b.Run(name+"/child", func(b *testing.B) {
			e := New(Config{})
			c, err := e.resolve(spec)
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				prober.Forget()
				if err := childCheck(context.Background(), spec, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
