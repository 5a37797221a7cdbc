// Command replicas runs three `sluice serve` processes behind Debian's
// HAProxy with deploy/haproxy/haproxy.cfg and measures, in one run (`make
// replicas-test`):
//
//   - steady load over several models, hashed by model ID and round-robin:
//     the cold loads each causes (the reason to hash: each replica keeps
//     its share of the models warm within --max-loaded-models);
//   - the same hashed load while one replica is killed with SIGKILL and
//     then restarted on its port, with the proxy's retries on connection
//     failure and without: requests sent, failed, failed after the proxy
//     marked the replica down, the proxy's retries, and the cold loads the
//     failover caused.
//
// The replicas serve fixture models (task asr, one slot, a load latency)
// through the inference protocol's infer route; the cold loads are the
// replicas' sluice_load_seconds_count, read from each process's /metrics
// (the killed one's just before the kill, the restarted one's from its
// start). Every figure of one invocation comes from the same machine and
// minutes, side by side.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type options struct {
	bin, cfg          string
	requests, clients int
	models, maxLoaded int
	loadMS, inferMS   int
	timeout           time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "binary", "", "sluice binary (default: go build ./cmd/sluice)")
	flag.StringVar(&o.cfg, "haproxy-config", "deploy/haproxy/haproxy.cfg", "HAProxy configuration")
	flag.IntVar(&o.requests, "requests", 600, "requests of each of the four runs")
	flag.IntVar(&o.clients, "clients", 6, "concurrent clients")
	flag.IntVar(&o.models, "models", 6, "models, spread evenly over the requests")
	flag.IntVar(&o.maxLoaded, "max-loaded-models", 3, "each replica's --max-loaded-models")
	flag.IntVar(&o.loadMS, "load-ms", 100, "a model's load latency (fixture load_ms)")
	flag.IntVar(&o.inferMS, "infer-ms", 5, "a request's latency (fixture infer_ms)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound of each run")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// result is one run's figures.
type result struct {
	name, balance         string
	retries               int
	kill                  bool
	sent, busy, failed    int64          // busy: a replica's 503 server_busy; failed: anything else but a 200
	kinds                 map[string]int // what the failures were
	failedAfterDown       int64
	proxyRetries, redisps int64
	coldLoads             int64
	downAfter, upAfter    time.Duration // from the kill: the proxy marked s2 down; s2 was back up
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "sluice-replicas-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.bin == "" {
		o.bin = filepath.Join(dir, "sluice")
		cmd := exec.Command("go", "build", "-o", o.bin, "./cmd/sluice")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("replicas: go build: %w", err)
		}
	}
	config := filepath.Join(dir, "models.yaml")
	var cb strings.Builder
	cb.WriteString("models:\n")
	for i := range o.models {
		fmt.Fprintf(&cb, "  - id: m%d\n    engine: fixture\n    task: asr\n    slots: 1\n    options: {load_ms: %d, infer_ms: %d}\n", i, o.loadMS, o.inferMS)
	}
	if err := os.WriteFile(config, []byte(cb.String()), 0o644); err != nil {
		return err
	}
	hash := "hdr(X-Sluice-Model)"
	runs := []result{
		{name: "steady, hashed by model", balance: hash, retries: 3},
		{name: "steady, round-robin", balance: "roundrobin", retries: 3},
		{name: "kill+restart, hashed, retries", balance: hash, retries: 3, kill: true},
		{name: "kill+restart, hashed, no retries", balance: hash, retries: 0, kill: true},
	}
	fmt.Printf("replicas: 3 sluice serve (--max-loaded-models %d) behind haproxy; %d models (fixture asr, load %d ms, infer %d ms); %d requests per run from %d clients\n",
		o.maxLoaded, o.models, o.loadMS, o.inferMS, o.requests, o.clients)
	for i := range runs {
		if err := oneRun(o, config, &runs[i]); err != nil {
			return err
		}
		r := runs[i]
		fmt.Printf("  %-34s sent %4d  busy %3d  failed %3d  (after down %3d)  proxy retries %3d  cold loads %3d\n",
			r.name, r.sent, r.busy, r.failed, r.failedAfterDown, r.proxyRetries, r.coldLoads)
	}
	fmt.Println()
	fmt.Println("| run | balance | retries | sent | busy (503 server_busy) | failed | failed after the proxy marked s2 down | proxy retries (redispatches) | cold loads | s2 down / back up after the kill |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		ud := "-"
		if r.kill {
			ud = fmt.Sprintf("%s / %s", r.downAfter.Round(time.Millisecond), r.upAfter.Round(time.Millisecond))
		}
		fmt.Printf("| %s | %s | %d | %d | %d | %d | %d | %d (%d) | %d | %s |\n", r.name, r.balance, r.retries, r.sent, r.busy, r.failed, r.failedAfterDown,
			r.proxyRetries, r.redisps, r.coldLoads, ud)
	}
	for _, r := range runs {
		for _, k := range slices.Sorted(maps.Keys(r.kinds)) {
			fmt.Printf("  %s: %d x %s\n", r.name, r.kinds[k], k)
		}
	}
	steady, rr, kill := runs[0].coldLoads, runs[1].coldLoads, runs[2].coldLoads
	fmt.Printf("\ncold loads: round-robin %d against hashing %d (%.1fx); the failover added %d to the hashed run\n",
		rr, steady, float64(rr)/float64(max(steady, 1)), kill-steady)
	return nil
}

// oneRun starts three fresh replicas and the proxy, sends the load (and
// kills and restarts s2 when r.kill), and fills r.
func oneRun(o options, config string, r *result) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	extra := []string{"--max-loaded-models", strconv.Itoa(o.maxLoaded), "--load-backoff", "0s"}
	reps := make([]*replica, 3)
	addrs := make([]string, 3)
	defer func() {
		for _, rp := range reps {
			if rp != nil {
				rp.stop()
			}
		}
	}()
	for i := range reps {
		a, err := freePort()
		if err != nil {
			return err
		}
		addrs[i] = a
		if reps[i], err = startReplica(ctx, o.bin, fmt.Sprintf("s%d", i+1), a, config, extra); err != nil {
			return err
		}
	}
	var baseline, gone int64 // loads before the load began; loads of the killed process
	for _, rp := range reps {
		n, err := loads(ctx, rp.addr)
		if err != nil {
			return err
		}
		baseline += n
	}
	px, err := startProxy(ctx, o.cfg, r.balance, r.retries, addrs)
	if err != nil {
		return err
	}
	defer px.stop()

	var next, completed, busy, failed, failedAfterDown atomic.Int64
	var kindsMu sync.Mutex
	r.kinds = map[string]int{}
	var downAt atomic.Int64 // unix nanoseconds when the proxy was seen marking s2 down; 0 before
	ctlDone := make(chan error, 1)
	third := make(chan struct{})
	twoThirds := make(chan struct{})
	var once1, once2 sync.Once
	if r.kill {
		go func() {
			ctlDone <- func() error {
				<-third
				n, err := loads(ctx, reps[1].addr) // just before the kill
				if err != nil {
					return err
				}
				gone = n
				start := time.Now()
				reps[1].Kill()
				if err := px.await(ctx, "s2", "DOWN"); err != nil {
					return err
				}
				downAt.Store(time.Now().UnixNano())
				r.downAfter = time.Since(start)
				<-twoThirds
				rp, err := startReplica(ctx, o.bin, "s2", addrs[1], config, extra)
				if err != nil {
					return err
				}
				reps[1] = rp
				n, err = loads(ctx, rp.addr) // its startup loads are not the failover's
				if err != nil {
					return err
				}
				gone -= n
				if err := px.await(ctx, "s2", "UP"); err != nil {
					return err
				}
				r.upAfter = time.Since(start)
				return nil
			}()
		}()
	} else {
		ctlDone <- nil
	}
	var ctlErr error
	ctlFinished := atomic.Bool{}
	go func() {
		ctlErr = <-ctlDone
		ctlFinished.Store(true)
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.clients}, Timeout: 60 * time.Second}
	body := []byte(`{"parameters":{"sample_rate":16000},"inputs":[{"name":"audio","shape":[4],"datatype":"INT16","data":[0,1,2,3]}]}`)
	var wg sync.WaitGroup
	for range o.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(o.requests) && ctlFinished.Load() {
					return
				}
				started := time.Now().UnixNano()
				switch out := send(ctx, client, px.front, fmt.Sprintf("m%d", i%int64(o.models)), body); out {
				case "":
				case "busy":
					busy.Add(1)
				default:
					failed.Add(1)
					if d := downAt.Load(); d != 0 && started >= d {
						failedAfterDown.Add(1)
					}
					kindsMu.Lock()
					r.kinds[out]++
					kindsMu.Unlock()
				}
				switch c := completed.Add(1); c {
				case int64(o.requests) / 3:
					once1.Do(func() { close(third) })
				case 2 * int64(o.requests) / 3:
					once2.Do(func() { close(twoThirds) })
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("replicas: %s: %w", r.name, ctx.Err())
	}
	if ctlErr != nil {
		return ctlErr
	}
	var total int64
	for _, rp := range reps {
		n, err := loads(ctx, rp.addr)
		if err != nil {
			return err
		}
		total += n
	}
	st, err := px.readStats(ctx)
	if err != nil {
		return err
	}
	for _, s := range st {
		r.proxyRetries += s.retries
		r.redisps += s.redisp
	}
	r.sent, r.busy, r.failed, r.failedAfterDown = completed.Load(), busy.Load(), failed.Load(), failedAfterDown.Load()
	r.coldLoads = total + gone - baseline
	return nil
}

// send posts one inference-protocol request for model through the proxy;
// it returns "" for a 200, "busy" for a replica's 503 server_busy (Sluice
// refusing what its residency limit cannot take now, with Retry-After), or
// what else became of it.
func send(ctx context.Context, c *http.Client, front, model string, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+front+"/v2/models/"+model+"/infer", bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		if e, ok := err.(interface{ Unwrap() error }); ok && e.Unwrap() != nil {
			err = e.Unwrap() // the url.Error's cause, without the URL
		}
		return "transport: " + err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	switch {
	case res.StatusCode == http.StatusOK:
		return ""
	case res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Sluice-Error-Type") == "server_busy":
		return "busy"
	case res.Header.Get("Sluice-Error-Type") != "":
		return fmt.Sprintf("%d %s from a replica", res.StatusCode, res.Header.Get("Sluice-Error-Type"))
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return fmt.Sprintf("%d from the proxy: %.80s", res.StatusCode, first)
}

// loads sums a replica's sluice_load_seconds_count over its models.
func loads(ctx context.Context, addr string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("replicas: scrape %s: %w", addr, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "sluice_load_seconds_count{") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("replicas: %q: %w", l, err)
		}
		n += int64(v)
	}
	return n, nil
}
