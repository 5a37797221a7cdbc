// Command benchhttp is the load generator of `make bench-http`
// ("Performance"). In one run it measures, over loopback:
//
//	(a) sluice: the full server (router, middleware, request IDs, metrics
//	    feed, runtime admission and release) with a warm zero-work fixture
//	    model at 4 slots, POST /v1/models/bench/infer;
//	(b) bare: a chi router with one handler doing the same strict JSON
//	    decode of the request and the same JSON encode of an answer of the
//	    same shape and size, and nothing else.
//
// Every round measures both targets back to back, in alternating order, so
// that drift of the machine (other work, CPU frequency) hits both alike;
// each round gives one paired ratio of req/s and one of CPU time per
// request, and each verdict is the median of its ratios. Every
// round is bounded by a request count and a duration, so the run stops by
// itself. It prints req/s, p50, p99 and CPU per request for both, and the
// ratios sluice/bare.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/server"
)

func main() {
	conc := flag.Int("c", 4, "concurrent clients (keep-alive connections)")
	n := flag.Int("n", 200000, "most requests per round and target")
	// Many short rounds rather than a few long ones: with the same total
	// time, 24 rounds of 500 ms put the verdict's median within 0.017 over
	// five runs where 6 rounds of 2 s spread over 0.032 (docs/design.md).
	d := flag.Duration("d", 500*time.Millisecond, "most time per round and target")
	rounds := flag.Int("rounds", 24, "rounds; each measures both targets, in alternating order")
	warm := flag.Duration("warmup", time.Second, "warm-up per target before measuring")
	slots := flag.Int("slots", 4, "slots of sluice's fixture model")
	only := flag.String("only", "", "measure only this target (sluice or bare), for profiling")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured rounds to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile (all allocations since start, sampled) to this file at the end")
	flag.Parse()
	onlyTarget, cpuProfile = *only, *cpuprofile
	if err := run(*conc, *n, *d, *rounds, *warm, *slots); err != nil {
		fmt.Fprintln(os.Stderr, "benchhttp:", err)
		os.Exit(1)
	}
	if *memprofile != "" {
		if err := writeHeapProfile(*memprofile); err != nil {
			fmt.Fprintln(os.Stderr, "benchhttp:", err)
			os.Exit(1)
		}
	}
}

// onlyTarget, when set, skips the other target (profiling); cpuProfile,
// when set, is where the measured rounds' CPU profile goes (the warm-up is
// left out).
var onlyTarget, cpuProfile string

const reqBody = `{"input":"the quick brown fox","stream":false}`

func run(conc, n int, d time.Duration, rounds int, warm time.Duration, slots int) error {
	sluiceURL, stopSluice, err := startSluice(slots)
	if err != nil {
		return err
	}
	defer stopSluice()
	bareURL, stopBare, err := startBare()
	if err != nil {
		return err
	}
	defer stopBare()

	targets := []struct {
		name, url string
		res       result
	}{{name: "sluice", url: sluiceURL}, {name: "bare", url: bareURL}}
	for i := range targets {
		if onlyTarget != "" && onlyTarget != targets[i].name {
			continue
		}
		if _, err := load(targets[i].url, conc, n, warm); err != nil {
			return fmt.Errorf("warm-up of %s: %w", targets[i].name, err)
		}
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// Each round measures both targets back to back, in alternating order,
	// and yields one paired ratio: a burst of other work on the machine
	// moves one round's pair, not the verdict, which is the median.
	var paired, pairedCPU []float64
	for r := 0; r < rounds; r++ {
		var rate, cpu [2]float64
		for k := range targets {
			i := k
			if r%2 == 1 {
				i = len(targets) - 1 - k
			}
			if onlyTarget != "" && onlyTarget != targets[i].name {
				continue
			}
			res, err := load(targets[i].url, conc, n, d)
			if err != nil {
				return fmt.Errorf("%s: %w", targets[i].name, err)
			}
			targets[i].res.add(res)
			rate[i], cpu[i] = res.rate(), float64(res.cpuPerReq())
		}
		if onlyTarget == "" {
			paired = append(paired, rate[0]/rate[1])
			pairedCPU = append(pairedCPU, cpu[1]/cpu[0])
		}
	}
	fmt.Printf("loopback, %d clients, %d rounds of at most %d requests or %v per target, GOMAXPROCS=%d\n",
		conc, rounds, n, d, maxProcs())
	fmt.Printf("%-7s %10s %10s %10s %10s %12s\n", "target", "requests", "req/s", "p50", "p99", "cpu/req")
	for _, t := range targets {
		fmt.Printf("%-7s %10d %10.0f %10v %10v %12v\n", t.name, len(t.res.lat), t.res.rate(), t.res.pct(50), t.res.pct(99),
			t.res.cpuPerReq())
	}
	if onlyTarget != "" {
		return nil
	}
	fmt.Printf("ratio sluice/bare req/s, all rounds pooled: %.3f\n", targets[0].res.rate()/targets[1].res.rate())
	median, lo, hi := medianOf(paired)
	fmt.Printf("ratio sluice/bare req/s, median of %d paired rounds: %.3f (range %.3f-%.3f; %s the 0.9 target)\n",
		len(paired), median, lo, hi, verdict(median))
	fmt.Printf("ratio bare/sluice cpu per request: %.3f (the same comparison in CPU time, robust to other load)\n",
		float64(targets[1].res.cpuPerReq())/float64(targets[0].res.cpuPerReq()))
	median, lo, hi = medianOf(pairedCPU)
	fmt.Printf("ratio bare/sluice cpu per request, median of %d paired rounds: %.3f (range %.3f-%.3f; %s the 0.9 target)\n",
		len(pairedCPU), median, lo, hi, verdict(median))
	return nil
}

// medianOf returns the median, least and greatest of xs (sorted in place).
func medianOf(xs []float64) (median, lo, hi float64) {
	slices.Sort(xs)
	median = xs[len(xs)/2]
	if len(xs)%2 == 0 {
		median = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return median, xs[0], xs[len(xs)-1]
}

func verdict(ratio float64) string {
	if ratio < 0.9 {
		return "misses"
	}
	return "meets"
}

// result is the latencies, wall time and process CPU time of one or more
// rounds.
type result struct {
	lat  []time.Duration
	busy time.Duration
	cpu  time.Duration
}

func (r *result) add(o result) {
	r.lat = append(r.lat, o.lat...)
	r.busy += o.busy
	r.cpu += o.cpu
}

// cpuPerReq is the process CPU time (client and server together) per
// request: less sensitive than req/s to other work on a shared machine.
func (r *result) cpuPerReq() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return (r.cpu / time.Duration(len(r.lat))).Round(100 * time.Nanosecond)
}

// cpuTime returns the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r *result) rate() float64 { return float64(len(r.lat)) / r.busy.Seconds() }

func (r *result) pct(p int) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(time.Microsecond)
}

// load sends requests from conc clients until n were sent or d passed.
func load(url string, conc, n int, d time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(n))
	lats := make([][]time.Duration, conc)
	errs := make([]error, conc)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuTime()
	for w := range conc {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			for ctx.Err() == nil && left.Add(-1) >= 0 {
				t0 := time.Now()
				res, err := c.Post(url, "application/json", bytes.NewReader([]byte(reqBody)))
				if err != nil {
					errs[w] = err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					errs[w] = fmt.Errorf("status %s", res.Status)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	r := result{busy: time.Since(start), cpu: cpuTime() - cpu0}
	for _, l := range lats {
		r.lat = append(r.lat, l...)
	}
	return r, errors.Join(errs...)
}

// startSluice starts the real server with a warm fixture model.
func startSluice(slots int) (string, func(), error) {
	cfg := server.DefaultConfig()
	cfg.ParallelJobs, cfg.Fixture = true, true
	s, err := server.New(cfg, server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", nil, err
	}
	spec := fmt.Sprintf(`{"engine":"fixture","slots":%d}`, slots)
	var ms server.ModelSpec
	if err := server.DecodeModelSpec([]byte(spec), &ms); err != nil {
		return "", nil, err
	}
	if err := s.RegisterModels(context.Background(), []server.ModelEntry{{ID: "bench", Spec: ms}}); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/v1/models/bench/infer", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	}, nil
}

// bareRequest and bareAnswer mirror server.InferRequest and the answer.
type bareRequest struct {
	Input              json.RawMessage `json:"input"`
	Stream             bool            `json:"stream,omitempty"`
	AdmissionTimeoutMS *int64          `json:"admission_timeout_ms,omitempty"`
}

type bareAnswer struct {
	ID            string          `json:"id"`
	Output        json.RawMessage `json:"output"`
	ConfigVersion uint64          `json:"config_version"`
	Slot          int             `json:"slot"`
}

// bareOutput has the size and shape of the fixture's output.
var bareOutput = json.RawMessage(`{"model":"bench","slot":0,"session":"bench/v1/0#1","config_version":1}`)

// startBare starts the bare chi handler: strict decode, encode, nothing
// else.
func startBare() (string, func(), error) {
	r := chi.NewRouter()
	r.Post("/v1/models/{id}/infer", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 25<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var req bareRequest
		if err := dec.Decode(&req); err != nil || req.Input == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(bareAnswer{ID: "0123456789abcdef", Output: bareOutput, ConfigVersion: 1, Slot: 0})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(out, '\n'))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	return "http://" + ln.Addr().String() + "/v1/models/bench/infer", func() {
		_ = hs.Close()
		<-done
	}, nil
}

// writeHeapProfile writes the allocation profile to path (with -only,
// what one target's server and its clients allocated).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func maxProcs() int { return runtime.GOMAXPROCS(0) }
