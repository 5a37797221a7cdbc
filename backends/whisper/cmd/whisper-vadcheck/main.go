// Command whisper-vadcheck measures the whisper engine's VAD filter
// (option and request field vad_filter: Sluice's Silero VAD v5 session in
// front of whisper) against no filter, in one run on one machine (make
// bench-whisper-vad): for the tiny and bench synthetic models with the
// Silero model make deps installs, a 60 s clip with long silences (12 s
// of silence, jfk.wav, 15 s of silence, jfk.wav, 11 s of silence) and
// four speech-only clips (jfk.wav and three cuts), each answered -n times
// on one slot with the filter and without it, interleaved; it prints wall
// seconds and CPU seconds per request of each and their ratio, and
// whether each speech-only clip's answer is byte-identical with and
// without the filter. First it times Sluice's Silero session alone over
// the 60 s clip (compare scripts/whispervad/vadspeed.c, whisper.cpp's
// built-in VAD over as much audio; make bench-whisper-vad runs both).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/onnx"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

func main() {
	models := flag.String("models", "tiny,bench", "synthetic models (tiny, bench)")
	n := flag.Int("n", 3, "requests per clip and mode")
	printLib := flag.Bool("print-lib", false, "print the library's path and exit (for make bench-whisper-vad)")
	flag.Parse()
	if *printLib {
		fmt.Println(whisper.LibraryPath())
		return
	}
	if err := run(*models, *n); err != nil {
		fmt.Fprintln(os.Stderr, "whisper-vadcheck:", err)
		os.Exit(1)
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

type clip struct {
	name string
	wav  []byte
}

func clips() (long clip, speech []clip, err error) {
	b, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		return long, nil, fmt.Errorf("jfk.wav (make deps): %w", err)
	}
	a, err := audio.ParseWAV(b)
	if err != nil {
		return long, nil, err
	}
	sec := whisper.SampleRate
	var s []int16
	s = append(s, make([]int16, 12*sec)...)
	s = append(s, a.Samples...)
	s = append(s, make([]int16, 15*sec)...)
	s = append(s, a.Samples...)
	s = append(s, make([]int16, 60*sec-len(s))...)
	long = clip{"silences-60s", audio.WAV(sec, s)}
	cut := func(from, to float64) []byte {
		return audio.WAV(sec, a.Samples[int(from*float64(sec)):min(len(a.Samples), int(to*float64(sec)))])
	}
	speech = []clip{{"jfk.wav", b}, {"jfk 0-3s", cut(0, 3)}, {"jfk 3-8s", cut(3, 8)}, {"jfk 5-11s", cut(5, 11)}}
	return long, speech, nil
}

// vadAlone times Sluice's Silero session alone (1 thread) over clip, the
// figure scripts/whispervad/vadspeed.c gives for whisper.cpp's built-in
// VAD over as much audio.
func vadAlone(ctx context.Context, c clip, n int) error {
	a, err := audio.ParseWAV(c.wav)
	if err != nil {
		return err
	}
	v, err := onnx.OpenVAD(ctx, "", catalogue.DefaultSources("").SileroModel(), 1)
	if err != nil {
		return err
	}
	defer v.Close()
	var wall, cpu float64
	for range n {
		c0, t0 := cpuSeconds(), time.Now()
		if _, err := v.Speech(ctx, a.Samples, whisper.VADParams); err != nil {
			return err
		}
		wall, cpu = wall+time.Since(t0).Seconds()/float64(n), cpu+(cpuSeconds()-c0)/float64(n)
	}
	fmt.Printf("Sluice's Silero VAD v5 session (ONNX Runtime), %d s of audio, 1 thread: %.3f s wall, %.3f s CPU per pass (%d passes)\n", len(a.Samples)/whisper.SampleRate, wall, cpu, n)
	return nil
}

func run(models string, n int) error {
	if err := whisper.Available(); err != nil {
		return err
	}
	long, speech, err := clips()
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "whisper-vadcheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	ctx := context.Background()
	fmt.Printf("library: %s; Silero: %s; %d requests per clip and mode, 1 slot, 1 thread\n", whisper.LibraryPath(), catalogue.DefaultSources("").SileroModel(), n)
	if err := vadAlone(ctx, long, n); err != nil {
		return err
	}
	for _, d := range []synth.Dims{synth.Tiny, synth.Bench} {
		if !strings.Contains(","+models+",", ","+d.Name+",") {
			continue
		}
		r, err := whisper.VADRecipe(d.Name, d, whisper.Seed, 1, catalogue.DefaultSources("").SileroModel(), false)
		if err != nil {
			return err
		}
		if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
			return err
		}
		spec := backends.Spec{Model: d.Name, Task: "asr", Engine: whisper.Name, Checkpoint: filepath.Join(root, d.Name), Options: []byte(`{}`), Slots: 1}
		s, _, err := whisper.New().Open(ctx, spec)
		if err != nil {
			return err
		}
		// ask answers c once with the filter on or off: the answer, wall
		// and CPU seconds.
		ask := func(c clip, filter bool) (string, float64, float64, error) {
			in := fmt.Sprintf(`{"language":"en","vad_filter":%v}`, filter)
			c0, t0 := cpuSeconds(), time.Now()
			o, err := s.Infer(ctx, backends.Request{Data: c.wav, Input: json.RawMessage(in)}, nil)
			return string(o.JSON), time.Since(t0).Seconds(), cpuSeconds() - c0, err
		}
		for _, c := range append([]clip{long}, speech...) {
			var wall, cpu [2]float64
			var ans [2]string
			for range n {
				for k, filter := range []bool{false, true} {
					a, w, u, err := ask(c, filter)
					if err != nil {
						s.Close(ctx)
						return err
					}
					ans[k], wall[k], cpu[k] = a, wall[k]+w/float64(n), cpu[k]+u/float64(n)
				}
			}
			var res [2]audio.ASRResult
			for k := range ans {
				_ = json.Unmarshal([]byte(ans[k]), &res[k])
			}
			same := "differ"
			if ans[0] == ans[1] {
				same = "identical"
			}
			fmt.Printf("%s\t%-13s\tno filter %.3f s wall %.3f s CPU (%d segments)\tvad_filter %.3f s wall %.3f s CPU (%d segments)\tratio %.2f wall %.2f CPU\tanswers %s\n",
				d.Name, c.name, wall[0], cpu[0], len(res[0].Segments), wall[1], cpu[1], len(res[1].Segments), wall[1]/wall[0], cpu[1]/cpu[0], same)
		}
		s.Close(ctx)
	}
	return nil
}
