// Command whisper-gpucheck runs the whisper engine's matched-output check
// and throughput on one build of whisper.cpp (the libsluice_whisper.so
// SLUICE_WHISPER_LIB names, else the CPU build), for scripts/gpu-check.sh
// (CPU against CUDA; a Vulkan check runs it the same way): for the tiny and
// bench synthetic models, the 1-slot answers to clips of jfk.wav, then
// pools of 1, 2 and 4 slots with as many concurrent clients answering
// every clip twice, byte-identical to the 1-slot answers; then requests/s
// at each slot count. -out writes the 1-slot answers; -compare A,B prints,
// clip by clip, whether two runs' answers are equal.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	flag.Parse()
	var err error
	if *compare != "" {
		err = compareRuns(*compare)
	} else {
		err = run(*label, *gpu, *out, *models)
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

func run(label string, gpu bool, out, models string) error {
	if err := whisper.Available(); err != nil {
		return err
	}
	fmt.Printf("library: %s\n", whisper.LibraryPath())
	reqs, err := clips()
	if err != nil {
		return err
	}
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
		rows, err := engines.Matched(ctx, whisper.New(), spec, d.Name, reqs, []int{1, 2, 4}, 2)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if row.Refused != nil {
				fmt.Printf("%s\t%s\tslots %d\trefused: %v\n", label, d.Name, row.Slots, row.Refused)
				continue
			}
			fmt.Printf("%s\t%s\tslots %d\tmatched %d/%d\t%s\n", label, d.Name, row.Slots, row.Matched, row.Requests, row.Status())
			failed = failed || row.Status() != "ok"
		}
		ref, err := engines.OpenPool(ctx, whisper.New(), spec)
		if err != nil {
			return err
		}
		for _, q := range reqs {
			o, err := ref.Sessions[0].Infer(ctx, q, nil)
			if err != nil {
				ref.Close(ctx)
				return err
			}
			answers[d.Name] = append(answers[d.Name], string(o.JSON))
		}
		ref.Close(ctx)
		for _, n := range []int{1, 2, 4} {
			spec.Slots = n
			pool, err := engines.OpenPool(ctx, whisper.New(), spec)
			if errors.Is(err, backends.ErrInvalid) {
				continue // the build admits fewer slots (reported above)
			}
			if err != nil {
				return err
			}
			var jobs []int
			for range 2 {
				for i := range reqs {
					jobs = append(jobs, i)
				}
			}
			t0 := time.Now()
			_, err = pool.Serve(ctx, reqs, jobs)
			el := time.Since(t0)
			pool.Close(ctx)
			if err != nil {
				return err
			}
			fmt.Printf("%s\t%s\tslots %d\t%.3f requests/s\n", label, d.Name, n, float64(len(jobs))/el.Seconds())
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
