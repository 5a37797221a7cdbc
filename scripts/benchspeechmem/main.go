// Command benchspeechmem is `make bench-speech-memory`: the server's peak
// resident memory and Go heap while it answers long /v1/audio/speech
// requests (default: 4,096 characters at speed 0.25 and 48 kHz, about
// 16 minutes of audio, 37-81 MB of WAV), 1 and 3 at once, per TTS engine,
// for the built binary and, with -base, a baseline binary in the same run.
//
// Each (engine, concurrency, binary) runs in a fresh `sluice serve` on
// loopback (one model, as many slots as the engine admits up to the
// concurrency), warmed by one short request; then the long requests are
// sent at once and read to their end. Peak RSS is the process's VmHWM at
// the end, beside its VmRSS after the warm-up; the Go heap is the largest
// heap the GC reports (GODEBUG=gctrace=1: the live heap at each GC's
// start) or /metrics shows (go_memstats_heap_alloc_bytes, polled every
// 20 ms). The bodies' SHA-256 (whole, and past the 44-byte WAV header) are
// compared between the binaries.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// engine is one TTS model the bench serves.
type engine struct {
	name, engine, checkpoint, root string
	maxSlots                       int
}

func main() {
	bin := flag.String("bin", "", "the sluice binary to measure")
	base := flag.String("base", "", "a baseline sluice binary measured in the same run (optional)")
	root := flag.String("models", "models", "models root (espeak-en, flite-slt)")
	sherpaRoot := flag.String("sherpa", "", "sherpa models root (models-sherpa) to add its TTS families; empty: none")
	engines := flag.String("engines", "espeak,flite,piper,kokoro,kitten,matcha", "engines to run (those whose checkpoint is present)")
	chars := flag.Int("chars", 4096, "characters of text per request")
	speed := flag.Float64("speed", 0.25, "speed of each request")
	rate := flag.Int("rate", 48000, "sample_rate of each request")
	format := flag.String("format", "wav", "response_format")
	conc := flag.String("conc", "1,3", "comma-separated concurrencies")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "benchspeechmem: -bin is required")
		os.Exit(2)
	}
	all := []engine{
		{"espeak", "espeak", "espeak-en", *root, 1},
		{"flite", "flite", "flite-slt", *root, 16},
	}
	if *sherpaRoot != "" {
		for _, f := range []struct{ name, ckpt string }{
			{"piper", "sherpa-piper-synthetic"}, {"kokoro", "sherpa-kokoro-synthetic"},
			{"kitten", "sherpa-kitten-synthetic"}, {"matcha", "sherpa-matcha-synthetic"},
		} {
			all = append(all, engine{f.name, "sherpa", f.ckpt, *sherpaRoot, 2}) // 2 cores: sherpa admits 2 slots
		}
	}
	want := map[string]bool{}
	for _, e := range strings.Split(*engines, ",") {
		want[e] = true
	}
	var levels []int
	for _, c := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "benchspeechmem: bad -conc %q\n", *conc)
			os.Exit(2)
		}
		levels = append(levels, n)
	}
	bins := []string{*bin}
	names := []string{"new"}
	if *base != "" {
		bins = []string{*base, *bin}
		names = []string{"base", "new"}
	}
	text := longText(*chars)
	fmt.Printf("# %d characters, speed %g, %d Hz, %s; peak = VmHWM, rss0 = VmRSS after warm-up, heap = largest Go heap seen\n", *chars, *speed, *rate, *format)
	fmt.Printf("%-8s %4s %-5s %9s %9s %9s %10s %10s %s\n", "engine", "conc", "bin", "rss0_MB", "peak_MB", "delta_MB", "heap_MB", "bytes/req", "sha256 whole/past-44 secs")
	for _, e := range all {
		if !want[e.name] {
			continue
		}
		if _, err := os.Stat(filepath.Join(e.root, e.checkpoint)); err != nil {
			fmt.Printf("%-8s skipped: %v\n", e.name, err)
			continue
		}
		for _, c := range levels {
			base := "" // the baseline's sums at this concurrency
			for i, b := range bins {
				r, err := measure(b, e, c, text, *speed, *rate, *format)
				if err != nil {
					fmt.Printf("%-8s %4d %-5s error: %v\n", e.name, c, names[i], err)
					continue
				}
				same := ""
				switch {
				case i == 0:
					base = r.sum
				case base == r.sum:
					same = " (same bytes as base)"
				case base != "" && base[13:] == r.sum[13:]:
					same = " (differs from base in the first 44 bytes only)"
				case base != "":
					same = " (differs from base)"
				}
				fmt.Printf("%-8s %4d %-5s %9.1f %9.1f %9.1f %10.1f %10d %s %.1f%s\n", e.name, c, names[i],
					r.rss0, r.peak, r.peak-r.rss0, r.heap, r.size, r.sum, r.secs, same)
			}
		}
	}
}

// longText is n characters of ordinary English sentences.
func longText(n int) string {
	s := strings.Repeat("The committee will review every application before the end of the month. ", n/70+1)
	return strings.TrimSpace(s[:n])
}

// result is one run's figures.
type result struct {
	rss0, peak, heap float64 // MB
	size             int64   // bytes of one answer
	sum              string  // SHA-256 of the answers (all equal, else an error)
	secs             float64 // wall time of the long requests
}

// measure starts bin serving e, warms it, sends c long requests at once
// and returns the figures.
func measure(bin string, e engine, c int, text string, speed float64, rate int, format string) (result, error) {
	dir, err := os.MkdirTemp("", "benchspeechmem")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	slots := min(c, e.maxSlots)
	cfg := fmt.Sprintf("models:\n  - {id: m, engine: %s, task: tts, checkpoint: %s, slots: %d}\n", e.engine, e.checkpoint, slots)
	if err := os.WriteFile(filepath.Join(dir, "models.yaml"), []byte(cfg), 0o644); err != nil {
		return result{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--parallel-jobs", "--listen", addr, "--models-root", e.root, "--config", filepath.Join(dir, "models.yaml"))
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var mu sync.Mutex
	var heap float64
	note := func(mb float64) {
		mu.Lock()
		heap = max(heap, mb)
		mu.Unlock()
	}
	measuring := make(chan struct{})
	go scanGC(stderr, measuring, note)
	u := "http://" + addr
	if err := ready(u); err != nil {
		return result{}, err
	}
	if _, _, err := speak(u, "Hello there.", 1, 0, format); err != nil {
		return result{}, fmt.Errorf("warm-up: %w", err)
	}
	rss0, err := status(cmd.Process.Pid, "VmRSS")
	if err != nil {
		return result{}, err
	}
	close(measuring)
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if v, err := metric(u, "go_memstats_heap_alloc_bytes"); err == nil {
					note(v / (1 << 20))
				}
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	sizes := make([]int64, c)
	sums := make([]string, c)
	errs := make([]error, c)
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sizes[i], sums[i], errs[i] = speak(u, text, speed, rate, format)
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	close(stop)
	<-polled
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	for _, s := range sums[1:] {
		if s != sums[0] {
			return result{}, fmt.Errorf("concurrent answers differ")
		}
	}
	peak, err := status(cmd.Process.Pid, "VmHWM")
	if err != nil {
		return result{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	return result{rss0: rss0, peak: peak, heap: heap, size: sizes[0], sum: sums[0], secs: secs}, nil
}

// gcLine matches gctrace's "A->B->C MB": A is the heap at the GC's start.
var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// scanGC reads the server's stderr and notes each GC's starting heap once
// measuring is closed.
func scanGC(r io.Reader, measuring <-chan struct{}, note func(float64)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		select {
		case <-measuring:
		default:
			continue
		}
		if m := gcLine.FindStringSubmatch(sc.Text()); m != nil && strings.HasPrefix(sc.Text(), "gc ") {
			v, _ := strconv.ParseFloat(m[1], 64)
			note(v)
		}
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func ready(u string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(u + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("server not ready in 30 s")
}

// wavHeader is the size of the WAV header the server writes.
const wavHeader = 44

// speak posts one speech request and returns the body's size and
// "whole/past-header" SHA-256 prefixes.
func speak(u, text string, speed float64, rate int, format string) (int64, string, error) {
	body, _ := json.Marshal(map[string]any{"model": "m", "input": text, "speed": speed, "sample_rate": rate, "response_format": format})
	resp, err := http.Post(u+"/v1/audio/speech", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	// Two sums: the whole body, and the body past a WAV header (44
	// bytes), so an answer whose header alone changed shows as such.
	whole, tail := sha256.New(), sha256.New()
	head := make([]byte, wavHeader)
	n, err := io.ReadFull(resp.Body, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, "", err
	}
	whole.Write(head[:n])
	m, err := io.Copy(io.MultiWriter(whole, tail), resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return int64(n) + m, hex.EncodeToString(whole.Sum(nil))[:12] + "/" + hex.EncodeToString(tail.Sum(nil))[:12], nil
}

// status reads a VmXXX field of /proc/pid/status in MB.
func status(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// metric reads one gauge of the server's /metrics.
func metric(u, name string) (float64, error) {
	r, err := http.Get(u + "/metrics")
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("no %s", name)
}
