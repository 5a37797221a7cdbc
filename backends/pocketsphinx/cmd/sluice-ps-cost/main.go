// Command sluice-ps-cost measures pocketsphinx's CPU time per second of
// audio on real speech (jfk.wav) beside hostile inputs (seeded white noise
// declared as raw PCM at 1, 8 and 16 kHz, which the engine resamples to
// 16 kHz), one request each on a fresh one-slot session, and prints each
// request's CPU seconds, audio seconds, ratio and outcome (an error is
// the cost budget stopping it). `make bench-ps-cost` runs it.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/pocketsphinx"
)

func main() {
	root := flag.String("models", "models", "models root (built by `make models`)")
	npm := flag.String("npm", "", "npm prefix (for jfk.wav)")
	seconds := flag.Float64("noise-seconds", 30, "seconds of audio in each noise request")
	flag.Parse()
	if err := run(*root, *npm, *seconds); err != nil {
		slog.Error("ps-cost", "err", err)
		os.Exit(1)
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// noise is seeded noise of the given peak amplitude: white, or brown (a
// clamped random walk).
func noise(rate int, seconds float64, seed uint64, amp int, brown bool) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	n := int(float64(rate) * seconds)
	b := make([]byte, 2*n)
	v := 0
	for i := range n {
		x := r.IntN(2*amp+1) - amp
		if brown {
			v = min(amp, max(-amp, v+x/8))
			x = v
		}
		binary.LittleEndian.PutUint16(b[2*i:], uint16(int16(x)))
	}
	return b
}

func run(root, npm string, seconds float64) error {
	ctx := context.Background()
	jfk, err := os.ReadFile(catalogue.DefaultSources(npm).JFK())
	if err != nil {
		return err
	}
	type job struct {
		name  string
		req   backends.Request
		audio float64
	}
	jobs := []job{{"speech jfk.wav", backends.Request{ID: "jfk", Data: jfk}, float64(len(jfk)-44) / 2 / 16000}}
	for _, rate := range []int{1000, 8000, 16000} {
		in, _ := json.Marshal(map[string]int{"sample_rate": rate})
		for _, amp := range []int{300, 3000, 10000} {
			for _, brown := range []bool{false, true} {
				kind := "white"
				if brown {
					kind = "brown"
				}
				jobs = append(jobs, job{fmt.Sprintf("%s %d %dHz", kind, amp, rate), backends.Request{ID: "noise", Input: in, Data: noise(rate, seconds, uint64(rate+amp), amp, brown)}, seconds})
			}
		}
	}
	eng := pocketsphinx.New()
	spec := backends.Spec{Model: "asr", Task: "asr", Engine: pocketsphinx.Name, Checkpoint: filepath.Join(root, catalogue.PocketsphinxEnUS), Options: []byte("{}"), Slots: 1}
	fmt.Printf("%-20s %8s %8s %10s  %s\n", "input", "audio_s", "cpu_s", "cpu/audio", "outcome")
	s, _, err := eng.Open(ctx, spec)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	// A first request warms the session (the decoder's first search
	// allocates its tables), so every figure is a warm one.
	if _, err := s.Infer(ctx, jobs[0].req, nil); err != nil {
		return err
	}
	for _, j := range jobs {
		c0 := cpu()
		out, err := s.Infer(ctx, j.req, nil)
		c := (cpu() - c0).Seconds()
		outcome := "ok"
		if err != nil {
			outcome = "error: " + err.Error()
		} else {
			var r struct{ Text string }
			json.Unmarshal(out.JSON, &r)
			outcome = fmt.Sprintf("ok %.60q", r.Text)
		}
		fmt.Printf("%-20s %8.1f %8.2f %10.3f  %s\n", j.name, j.audio, c, c/j.audio, outcome)
	}
	return nil
}
