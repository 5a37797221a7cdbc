// Command whisper-gpucheck runs the whisper engine's matched-output check
// and throughput on one build of whisper.cpp (the libsluice_whisper.so
// SLUICE_WHISPER_LIB names, else the CPU build), for scripts/gpu-check.sh
// (CPU against CUDA) and scripts/whisper-vulkan-check.sh (CPU against
// Vulkan on lavapipe): for the tiny and bench synthetic models, the 1-slot
// answers to clips of jfk.wav, then pools of 1, 2 and 4 slots with as many
// concurrent clients answering every clip -rounds times, byte-identical
// to the 1-slot answers, with each pool's requests/s and CPU seconds per
// request from the same run. -out writes the 1-slot answers; -compare A,B
// prints, clip by clip, whether two runs' answers are equal.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
)

func main() {
	label := flag.String("label", "cpu", "name of this run in the table")
	gpu := flag.Bool("gpu", false, "ask the library for its GPU backend (option gpu)")
	out := flag.String("out", "", "write the 1-slot answers (JSON) here")
	compare := flag.String("compare", "", "A.json,B.json: compare two runs' answers and exit")
	models := flag.String("models", "tiny,bench", "synthetic models to check (tiny, bench)")
	nclips := flag.Int("clips", 5, "how many of the clips (1..5: jfk.wav, three cuts, a 45 s loop)")
	rounds := flag.Int("rounds", 2, "times each pool answers every clip")
	slotList := flag.String("slots", "1,2,4", "the pools' slot counts")
	flag.Parse()
	var err error
	if *compare != "" {
		err = compareRuns(*compare)
	} else {
		var slots []int
		for _, f := range strings.Split(*slotList, ",") {
			n, perr := strconv.Atoi(f)
			if perr != nil || n < 1 || n > 16 {
				fmt.Fprintf(os.Stderr, "whisper-gpucheck: -slots %q: each count 1..16\n", *slotList)
				os.Exit(2)
			}
			slots = append(slots, n)
		}
		err = run(*label, *gpu, *out, *models, *nclips, *rounds, slots)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "whisper-gpucheck:", err)
		os.Exit(1)
	}
}

func clips() ([]backends.Request, error) {
	b, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		return nil, fmt.Errorf("jfk.wav (make deps): %w", err)
	}
	a, err := audio.ParseWAV(b)
	if err != nil {
		return nil, err
	}
	cut := func(from, to float64) []byte {
		return audio.WAV(16000, a.Samples[int(from*16000):min(len(a.Samples), int(to*16000))])
	}
	long := make([]int16, 45*16000)
	for i := range long {
		long[i] = a.Samples[i%len(a.Samples)]
	}
	var reqs []backends.Request
	for i, w := range [][]byte{b, cut(0, 3), cut(3, 8), cut(5, 11), audio.WAV(16000, long)} {
		reqs = append(reqs, backends.Request{ID: fmt.Sprintf("clip-%d", i), Data: w})
	}
	return reqs, nil
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// timedServe answers jobs on pool and returns the answers' comparable
// bytes, requests/s and CPU seconds per request (the whole process's: a
// GPU driver's threads, lavapipe's included, count).
func timedServe(ctx context.Context, pool *engines.Pool, reqs []backends.Request, jobs []int) ([][]byte, float64, float64, error) {
	c0, t0 := cpuSeconds(), time.Now()
	got, err := pool.Serve(ctx, reqs, jobs)
	el, cpu := time.Since(t0).Seconds(), cpuSeconds()-c0
	return got, float64(len(jobs)) / el, cpu / float64(len(jobs)), err
}

// run checks each model: a 1-slot pool answers every clip in order (the
// reference, and the answers -out writes), then pools of 1, 2 and 4 slots
// with as many concurrent clients answer every clip rounds times in a
// rotated order, each answer compared byte for byte with the reference;
// each row's requests/s and CPU per request come from the same run.
func run(label string, gpu bool, out, models string, nclips, rounds int, slots []int) error {
	if err := whisper.Available(); err != nil {
		return err
	}
	names, devices, err := whisper.Backends()
	if err != nil {
		return err
	}
	fmt.Printf("library: %s (ggml backends %s, %d devices)\n", whisper.LibraryPath(), names, devices)
	if gpu && devices < 2 {
		// whisper.cpp would decode on the CPU without a word.
		return fmt.Errorf("-gpu: the library found no device besides the CPU (lavapipe needs GGML_VK_VISIBLE_DEVICES=0)")
	}
	reqs, err := clips()
	if err != nil {
		return err
	}
	if nclips < 1 || nclips > len(reqs) || rounds < 1 {
		return fmt.Errorf("-clips %d outside 1..%d or -rounds %d below 1", nclips, len(reqs), rounds)
	}
	reqs = reqs[:nclips]
	root, err := os.MkdirTemp("", "whisper-gpucheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	answers := map[string][]string{}
	ctx := context.Background()
	failed := false
	for _, d := range []synth.Dims{synth.Tiny, synth.Bench} {
		if !strings.Contains(","+models+",", ","+d.Name+",") {
			continue
		}
		r, err := whisper.Recipe(d.Name, d, whisper.Seed, catalogue.MaxSlots)
		if err != nil {
			return err
		}
		if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
			return err
		}
		opts := fmt.Sprintf(`{"oversubscribe":true,"gpu":%v}`, gpu)
		spec := backends.Spec{Model: d.Name, Task: "asr", Engine: whisper.Name, Checkpoint: filepath.Join(root, d.Name), Options: []byte(opts), Slots: 1}
		ref, err := engines.OpenPool(ctx, whisper.New(), spec)
		if err != nil {
			return err
		}
		seq := make([]int, len(reqs))
		for i := range seq {
			seq[i] = i
		}
		want, rps, cpu, err := timedServe(ctx, ref, reqs, seq)
		ref.Close(ctx)
		if err != nil {
			return err
		}
		for _, o := range want {
			// Normalize's bytes: content type, NUL, JSON, NUL, data.
			answers[d.Name] = append(answers[d.Name], string(bytes.Split(o, []byte{0})[1]))
		}
		fmt.Printf("%s\t%s\treference\t%d clips in order\t%.3f requests/s\t%.2f CPU s/request\n", label, d.Name, len(reqs), rps, cpu)
		for _, n := range slots {
			spec.Slots = n
			pool, err := engines.OpenPool(ctx, whisper.New(), spec)
			if errors.Is(err, backends.ErrInvalid) {
				fmt.Printf("%s\t%s\tslots %d\trefused: %v\n", label, d.Name, n, err)
				continue
			}
			if err != nil {
				return err
			}
			var jobs []int
			for r := range rounds {
				for i := range reqs {
					jobs = append(jobs, (len(reqs)-1-i+r)%len(reqs)) // reversed, rotated per round
				}
			}
			got, rps, cpu, err := timedServe(ctx, pool, reqs, jobs)
			pool.Close(ctx)
			if err != nil {
				return err
			}
			matched := 0
			for i, g := range got {
				if bytes.Equal(g, want[jobs[i]]) {
					matched++
				}
			}
			status := "ok"
			if matched != len(jobs) {
				status, failed = "MISMATCH", true
			}
			fmt.Printf("%s\t%s\tslots %d\tmatched %d/%d\t%s\t%.3f requests/s\t%.2f CPU s/request\n", label, d.Name, n, matched, len(jobs), status, rps, cpu)
		}
	}
	if out != "" {
		b, _ := json.Marshal(answers)
		if err := os.WriteFile(out, b, 0o644); err != nil {
			return err
		}
	}
	if failed {
		return fmt.Errorf("%s: a pool's answers differed from one slot's", label)
	}
	return nil
}

func compareRuns(list string) error {
	a, b, ok := strings.Cut(list, ",")
	if !ok {
		return fmt.Errorf("-compare wants A.json,B.json")
	}
	load := func(p string) (map[string][]string, error) {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var m map[string][]string
		return m, json.Unmarshal(raw, &m)
	}
	ma, err := load(a)
	if err != nil {
		return err
	}
	mb, err := load(b)
	if err != nil {
		return err
	}
	for model, xs := range ma {
		same := 0
		for i, x := range xs {
			if i < len(mb[model]) && mb[model][i] == x {
				same++
			}
		}
		fmt.Printf("%s: %d of %d clips answered byte-identically by %s and %s\n", model, same, len(xs), filepath.Base(a), filepath.Base(b))
	}
	return nil
}
