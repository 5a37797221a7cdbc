package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"
)

// model is one fixture model of the workload: its backend latencies (the
// fixture sleeps them, so a request's service time does not depend on
// load) and its open-loop arrival process.
type model struct {
	ID      string
	InferMS int     // fixture infer_ms: the service time of every request
	LoadMS  int     // fixture load_ms and clone_ms: a cold load, and each further slot's session (a real engine's Clone opens a session as its load does)
	Rate    float64 // Poisson arrivals a second between bursts
	Burst   int     // requests of one burst
	// Real, when set, is a real engine's spec (engine, task, checkpoint)
	// instead of the fixture's; its service time is the engine's own, which
	// depends on the input and on what else runs on the machine, so the
	// client-side wait (latency less service) is not estimated for it.
	Real  map[string]any
	Input map[string]any // the request input (default: {})
}

// realModel is -real's model: flite's slt voice (make models) on one
// sentence, about a second of speech.
var realModel = model{ID: "tts", Rate: 6, Burst: 6,
	Real:  map[string]any{"engine": "flite", "task": "tts", "checkpoint": "flite-slt"},
	Input: map[string]any{"text": "A scheduler decides who waits, and for how long."}}

// models are the workload's models: at these rates each keeps one slot
// about 60% busy between bursts (so most requests queue behind another and
// the median wait is not zero), and a burst queues several service times
// of work on one slot at once.
var models = []model{
	{ID: "fast", InferMS: 15, LoadMS: 80, Rate: 40, Burst: 14},
	{ID: "mid", InferMS: 60, LoadMS: 150, Rate: 10, Burst: 7},
	{ID: "slow", InferMS: 200, LoadMS: 300, Rate: 3, Burst: 4},
}

// spec is the fixture model spec of m with slots slots (PUT /v1/models/{id}
// and the --config file).
func (m model) spec(slots int) map[string]any {
	if m.Real != nil {
		s := map[string]any{"slots": slots}
		for k, v := range m.Real {
			s[k] = v
		}
		return s
	}
	return map[string]any{"engine": "fixture", "task": "echo", "slots": slots,
		"options": map[string]any{"load_ms": m.LoadMS, "clone_ms": m.LoadMS, "infer_ms": m.InferMS}}
}

// arrival is one scheduled client action of the workload: an inference
// request (Model set, Op empty) or a management operation.
type arrival struct {
	At    time.Duration // offset from the workload's start
	Model string
	Op    string // "", "reconfigure", "unload", "register", "delete"
	Burst bool   // part of a burst (for the report only)
}

// schedule is the seeded open-loop workload of length d: per model Poisson
// arrivals at its Rate, bursts (every model in turn, at seeded times about
// 2.5 s apart: Burst requests 2 ms apart), and four management operations: a
// reconfigure of mid (a new config version loads while the old drains) at
// 30%, an unload of slow at 50% (its next request cold-loads), and the
// register and delete of a fourth model at 70% and 75%. The same seed and
// length give the same schedule.
func schedule(seed uint64, d time.Duration) []arrival {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []arrival
	for _, m := range models {
		for t := expo(rng, m.Rate); t < d; t += expo(rng, m.Rate) {
			out = append(out, arrival{At: t, Model: m.ID})
		}
	}
	nb := max(int(d/(2500*time.Millisecond)), len(models))
	for i := range nb {
		m := models[i%len(models)]
		at := time.Duration((float64(i) + 0.25 + 0.5*rng.Float64()) * float64(d) / float64(nb))
		for k := range m.Burst {
			out = append(out, arrival{At: at + time.Duration(k)*2*time.Millisecond, Model: m.ID, Burst: true})
		}
	}
	frac := func(f float64) time.Duration { return time.Duration(f * float64(d)) }
	out = append(out,
		arrival{At: frac(0.30), Model: "mid", Op: "reconfigure"},
		arrival{At: frac(0.50), Model: "slow", Op: "unload"},
		arrival{At: frac(0.70), Model: "extra", Op: "register"},
		arrival{At: frac(0.75), Model: "extra", Op: "delete"})
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

func expo(rng *rand.Rand, rate float64) time.Duration {
	return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
}

// outcome is what the client saw of one inference request.
type outcome struct {
	model   string
	status  int
	latency time.Duration // request sent to answer read
}

// opResult is what the client saw of one management operation.
type opResult struct {
	op, model string
	status    int
	latency   time.Duration
}

// client runs a schedule open-loop against base: every arrival is sent at
// its time whatever is still out.
type client struct {
	base  string
	hc    *http.Client
	slots int // the slots a reconfigure or register asks for
}

func newClient(base string, slots int) *client {
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	return &client{base: base, slots: slots, hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// run sends every arrival at its offset from now and returns the outcomes
// once every answer is in (or ctx ends).
func (c *client) run(ctx context.Context, sched []arrival) ([]outcome, []opResult) {
	var (
		mu   sync.Mutex
		outs []outcome
		ops  []opResult
		wg   sync.WaitGroup
	)
	start := time.Now()
	for _, a := range sched {
		if wait := time.Until(start.Add(a.At)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(a arrival) {
			defer wg.Done()
			t0 := time.Now()
			if a.Op == "" {
				in := modelByID(a.Model).Input
				if in == nil {
					in = map[string]any{}
				}
				st := c.do(ctx, http.MethodPost, "/v1/models/"+a.Model+"/infer", map[string]any{"input": in})
				mu.Lock()
				outs = append(outs, outcome{model: a.Model, status: st, latency: time.Since(t0)})
				mu.Unlock()
				return
			}
			st := c.manage(ctx, a)
			mu.Lock()
			ops = append(ops, opResult{op: a.Op, model: a.Model, status: st, latency: time.Since(t0)})
			mu.Unlock()
		}(a)
	}
	wg.Wait()
	return outs, ops
}

// manage sends one management operation.
func (c *client) manage(ctx context.Context, a arrival) int {
	switch a.Op {
	case "reconfigure": // mid's options change: a new config version
		s := modelByID(a.Model).spec(c.slots)
		s["options"].(map[string]any)["chunks"] = 2
		return c.do(ctx, http.MethodPut, "/v1/models/"+a.Model, s)
	case "unload":
		return c.do(ctx, http.MethodPost, "/v1/models/"+a.Model+"/unload", nil)
	case "register":
		m := model{ID: a.Model, InferMS: 10, LoadMS: 100}
		return c.do(ctx, http.MethodPut, "/v1/models/"+a.Model, m.spec(c.slots))
	case "delete":
		return c.do(ctx, http.MethodDelete, "/v1/models/"+a.Model, nil)
	}
	return 0
}

func modelByID(id string) model {
	for _, m := range models {
		if m.ID == id {
			return m
		}
	}
	return model{ID: id}
}

// do sends one JSON request and reads the whole answer; it returns the
// status, or 0 when no answer came.
func (c *client) do(ctx context.Context, method, path string, body any) int {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0
	}
	return resp.StatusCode
}

// describe summarizes a schedule: requests per model, bursts, operations.
func describe(sched []arrival) string {
	n := map[string]int{}
	burst, ops := 0, 0
	for _, a := range sched {
		switch {
		case a.Op != "":
			ops++
		default:
			n[a.Model]++
			if a.Burst {
				burst++
			}
		}
	}
	s := ""
	for _, m := range models {
		s += fmt.Sprintf("%s %d, ", m.ID, n[m.ID])
	}
	return fmt.Sprintf("%s%d of them in bursts; %d management operations", s, burst, ops)
}
