// Command benchwhisper is `make bench-whisper`: the same mixed workload of
// long and short clips, in one run and on the same synthetic model file
// (backends/whisper/synth's Bench dims, seeded), sent over loopback to
// (a) whisper.cpp 1.9.1's own examples/server, built from the same npm
// source by backends/whisper/shim/build.sh, which serves one request at a
// time behind a global mutex, (b) Sluice's server with the whisper
// engine (1.9.1) at 1, 2 and 4 slots (one thread per slot; the peer runs
// with 1 thread, as one slot does, and with 2, this machine's cores),
// (c) with -baseline-lib, the same Sluice rows on whisper.cpp 1.5.0
// (shim/build-1.5.0.sh), each in a child process since one process loads
// one libwhisper, and (d) with -types, the bench model quantized by
// whisper-quantize (q5_0, q8_0, ...) at 2 slots beside f16. Every
// target decodes greedily without temperature fallback in English, so
// they do the same work per clip. It prints, per target, the whole
// workload's requests/s, CPU seconds per request (robust to other work on
// the machine) and the short clips' p50 and p99 latency, then, measured on
// the engine directly, the time from a cancelled context to a free slot
// mid-decode.
//
// Size (defaults): 2 long clips of 120 s (4 windows each) and 12 short
// ones of 3 s (jfk.wav repeated or cut), sent by 8 concurrent clients in a
// fixed order with the long clips first, so shorts queue behind them as in
// whisper.cpp issue #1803; 2 rounds in alternating order; about 2 minutes
// per target and round on 2 busy cores.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
	"github.com/sluice-dev/sluice/server"
)

func main() {
	long := flag.Int("long", 2, "long clips in the workload")
	short := flag.Int("short", 12, "short clips in the workload")
	longSec := flag.Float64("long-seconds", 120, "length of a long clip (whisper pads every 30 s window: a long clip is several windows)")
	shortSec := flag.Float64("short-seconds", 3, "length of a short clip")
	clients := flag.Int("clients", 8, "concurrent clients")
	slotList := flag.String("slots", "1,2,4", "Sluice slot counts")
	cancels := flag.Int("cancels", 5, "cancellations measured mid-decode")
	flag.IntVar(&opt.streams, "streams", 3, "streamed 60 s decodes timed to their first delta (0: none)")
	rounds := flag.Int("rounds", 2, "rounds; each runs every target, in alternating order")
	peerThreads := flag.String("peer-threads", "1,2", "thread counts of whisper.cpp's server (one row each; the first is the baseline)")
	npm := flag.String("npm", "", "npm prefix (default $SLUICE_NPM_PREFIX or <module>/.deps/npm)")
	flag.StringVar(&opt.baselineLib, "baseline-lib", "", "a whisper.cpp 1.5.0 build (shim/build-1.5.0.sh's libwhisper.so): adds its Sluice rows, run in a child process, at the same slot counts")
	flag.StringVar(&opt.types, "types", "", "quantized types of the bench model to add as 2-slot rows beside f16 (for example q5_0,q8_0; whisper-quantize makes them)")
	flag.IntVar(&opt.childSlots, "child-slots", 0, "internal: run one Sluice row in this process and print it as JSON")
	flag.StringVar(&opt.childRoot, "child-root", "", "internal: the models root of -child-slots")
	flag.StringVar(&opt.childModel, "child-model", "bench", "internal: the checkpoint of -child-slots")
	flag.Parse()
	if opt.childSlots > 0 {
		if err := child(*long, *short, *longSec, *shortSec, *clients, *cancels, *npm); err != nil {
			fmt.Fprintln(os.Stderr, "benchwhisper child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*long, *short, *longSec, *shortSec, *clients, *slotList, *cancels, *rounds, *peerThreads, *npm); err != nil {
		fmt.Fprintln(os.Stderr, "benchwhisper:", err)
		os.Exit(1)
	}
}

func run(nLong, nShort int, longSec, shortSec float64, clients int, slotList string, cancels, rounds int, peerThreads, npm string) error {
	src := catalogue.DefaultSources(npm)
	jfk, err := os.ReadFile(src.JFK())
	if err != nil {
		return fmt.Errorf("jfk.wav (make deps): %w", err)
	}
	speech, err := audio.ParseWAV(jfk)
	if err != nil {
		return err
	}
	peerBin := filepath.Join(filepath.Dir(whisper.LibraryPath()), "whisper-server")
	if _, err := os.Stat(peerBin); err != nil && peerThreads != "" {
		return fmt.Errorf("%s missing: the Makefile target builds it (build.sh ... server), or -peer-threads '' leaves it out: %w", peerBin, err)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-whisper")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r, err := whisper.Recipe("bench", synth.Bench, whisper.Seed, catalogue.MaxSlots)
	if err != nil {
		return err
	}
	recipes := []catalogue.Recipe{r}
	var types []string
	if opt.types != "" {
		types = strings.Split(opt.types, ",")
	}
	for _, q := range types {
		qr, err := whisper.QuantizedRecipe("bench-"+q, synth.Bench, whisper.Seed, catalogue.MaxSlots, q)
		if err != nil {
			return err
		}
		recipes = append(recipes, qr)
		fmt.Printf("bench model %s: %.2f MB (f16 %.2f MB)\n", q, float64(len(qr.Files[0].Content))/1e6, float64(len(r.Files[0].Content))/1e6)
	}
	if _, err := catalogue.Build(dir, recipes); err != nil {
		return err
	}
	model := filepath.Join(dir, "bench", whisper.ModelFile)
	jobs := workload(speech.Samples, nLong, nShort, longSec, shortSec)
	fmt.Printf("model: synthetic %s (state %d, %d+%d layers, %.1f MB), %d long clips of %.0f s and %d short of %.0f s, %d clients\n\n",
		synth.Bench.Name, synth.Bench.State, synth.Bench.AudioLayers, synth.Bench.TextLayers, float64(len(r.Files[0].Content))/1e6,
		nLong, longSec, nShort, shortSec, clients)

	type target struct {
		name string
		run  func() (sample, error)
	}
	var targets []target
	for _, f := range strings.Split(peerThreads, ",") {
		if f == "" {
			continue
		}
		var th int
		if _, err := fmt.Sscan(f, &th); err != nil || th < 1 {
			return fmt.Errorf("bad peer thread count %q", f)
		}
		targets = append(targets, target{fmt.Sprintf("whisper.cpp server (serial), %d thread(s)", th), func() (sample, error) { return benchPeer(peerBin, model, th, jobs, clients) }})
	}
	for _, f := range strings.Split(slotList, ",") {
		var slots int
		if _, err := fmt.Sscan(f, &slots); err != nil || slots < 1 {
			return fmt.Errorf("bad slot count %q", f)
		}
		targets = append(targets, target{fmt.Sprintf("sluice whisper %s, %d slot(s)", whisper.Version, slots), func() (sample, error) { return benchSluice(dir, "bench", slots, jobs, clients) }})
		if opt.baselineLib != "" {
			targets = append(targets, target{fmt.Sprintf("sluice whisper 1.5.0, %d slot(s)", slots), func() (sample, error) {
				return benchChild(opt.baselineLib, dir, "bench", slots, npm, nLong, nShort, longSec, shortSec, clients)
			}})
		}
	}
	for _, q := range types {
		targets = append(targets, target{fmt.Sprintf("sluice whisper %s %s, 2 slot(s)", whisper.Version, q), func() (sample, error) { return benchSluice(dir, "bench-"+q, 2, jobs, clients) }})
	}
	// Rounds alternate the targets' order, so the machine's drift (other
	// work on shared cores) falls on all of them alike.
	total := make([]sample, len(targets))
	for r := range rounds {
		for k := range targets {
			i := k
			if r%2 == 1 {
				i = len(targets) - 1 - k
			}
			got, err := targets[i].run()
			if err != nil {
				return fmt.Errorf("%s: %w", targets[i].name, err)
			}
			total[i].add(got)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\trequests/s\tvs serial\tCPU s/request\tshort p50 s\tshort p99 s\tlong p50 s\twall s\t")
	base := total[0].rps()
	for i, t := range targets {
		x := total[i]
		fmt.Fprintf(tw, "%s\t%.3f\t%.2fx\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t\n", t.name, x.rps(), x.rps()/base, x.cpu.Seconds()/float64(x.n),
			pct(x.shorts, 50), pct(x.shorts, 99), pct(x.longs, 50), x.wall.Seconds())
	}
	tw.Flush()
	fmt.Printf("(%d rounds; CPU is the peer process's rusage, and for Sluice this process's, load generator included)\n", rounds)
	if opt.streams > 0 {
		if err := measureFirstDelta(filepath.Join(dir, "bench"), speech.Samples, opt.streams); err != nil {
			return fmt.Errorf("first delta: %w", err)
		}
	}
	if cancels > 0 {
		if err := measureCancel("whisper "+whisper.Version, filepath.Join(dir, "bench"), speech.Samples, cancels); err != nil {
			return err
		}
		if err := measureHTTPCancel("whisper "+whisper.Version, dir, speech.Samples, cancels); err != nil {
			return fmt.Errorf("cancel over HTTP: %w", err)
		}
		if opt.baselineLib != "" {
			out, err := childCmd(opt.baselineLib, dir, "bench", 0, npm, "-cancels", fmt.Sprint(cancels)).Output()
			if err != nil {
				return fmt.Errorf("1.5.0 cancels: %w", err)
			}
			fmt.Print(string(out))
		}
	}
	return nil
}

// job is one clip of the workload.
type job struct {
	wav  []byte
	long bool
}

// workload lays out the long clips first, then the shorts, so that the
// shorts arrive while the long clips decode.
func workload(speech []int16, nLong, nShort int, longSec, shortSec float64) []job {
	clip := func(seconds float64, from int) []byte {
		n := int(seconds * 16000)
		s := make([]int16, n)
		for i := range s {
			s[i] = speech[(from+i)%len(speech)]
		}
		return audio.WAV(16000, s)
	}
	var jobs []job
	for i := range nLong {
		jobs = append(jobs, job{wav: clip(longSec, i*16000), long: true})
	}
	for i := range nShort {
		jobs = append(jobs, job{wav: clip(shortSec, i*8000)})
	}
	return jobs
}

func benchSluice(root, checkpoint string, slots int, jobs []job, clients int) (sample, error) {
	cfg := server.DefaultConfig()
	cfg.ParallelJobs, cfg.ModelsRoot = true, root
	cfg.AdmissionTimeout = 30 * time.Minute
	s, err := server.New(cfg, server.Options{Engines: engines.Registry(engines.Config{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return sample{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return sample{}, err
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	defer func() {
		_ = s.Shutdown(context.Background())
		<-served
	}()
	spec := server.ModelSpec{Engine: whisper.Name, Task: "asr", Checkpoint: checkpoint, Slots: []byte(fmt.Sprint(slots)),
		Options: []byte(`{"threads":1,"oversubscribe":true,"max_seconds":3600}`)}
	if err := s.RegisterModels(context.Background(), []server.ModelEntry{{ID: "asr", Spec: spec}}); err != nil {
		return sample{}, err
	}
	before := selfCPU()
	x, err := drive("sluice", "http://"+ln.Addr().String()+"/v1/audio/transcriptions", sluiceForm, jobs, clients)
	x.cpu = selfCPU() - before
	return x, err
}

// benchPeer starts whisper.cpp's server, drives the workload and stops it;
// the CPU is the server process's own.
func benchPeer(bin, model string, threads int, jobs []job, clients int) (sample, error) {
	p, err := startPeer(bin, model, threads)
	if err != nil {
		return sample{}, err
	}
	x, err := drive("whisper.cpp server", p.url+"/inference", peerForm, jobs, clients)
	p.stop()
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		x.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return x, err
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureCancel opens the bench model on the engine directly and, n
// times, cancels a 60 s decode once whisper is decoding (its decode-start
// event), timing the cancel to Infer's return: the slot is free then.
func measureCancel(label, dir string, speech []int16, n int) error {
	var times []time.Duration
	for range n {
		d, err := cancelOnce(dir, speech)
		if err != nil {
			return err
		}
		times = append(times, d)
	}
	slices.Sort(times)
	fmt.Printf("\ncancel mid-decode to free slot (%s, engine, bench model, 1 thread): p50 %v, max %v over %d\n",
		label, times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), n)
	return nil
}

func le16(s []int16) []byte {
	b := make([]byte, 2*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}

// peer is a running whisper.cpp server.
type peer struct {
	url string
	cmd *exec.Cmd
}

func startPeer(bin, model string, threads int) (*peer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "-m", model, "-t", fmt.Sprint(threads), "-l", "en", "-nf", "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &peer{url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(p.url + "/")
		if err == nil {
			resp.Body.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("whisper.cpp server did not start in 60 s: %w", err)
		}
		time.Sleep(100 * time.Millisecond) // a child process's readiness: nothing to wait on but its port
	}
}

func (p *peer) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func osPipe() (*os.File, *os.File, error) { return os.Pipe() }
