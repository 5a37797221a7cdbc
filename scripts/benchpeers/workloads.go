package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// size is the run's size: the measuring window of the streaming workloads,
// the burst's request count and the length of the alternating sequence.
type size struct {
	window time.Duration
	burst  int
	seq    int
}

// workload is one of the workloads: the models it needs and what
// it does against a design's URL.
type workload struct {
	name string
	env  func(e env) env // fills in models, room and queue limit
	run  func(ctx context.Context, c *client, e env, sz size) ([]figure, error)
}

// fx is a fixture model spec with the given slots and latencies.
func fx(engine string, slots, loadMS, inferMS int, extra string) specBody {
	opts := fmt.Sprintf(`{"load_ms":%d,"infer_ms":%d%s}`, loadMS, inferMS, extra)
	return specBody{Engine: engine, Slots: slots, Options: json.RawMessage(opts)}
}

func input(s string) json.RawMessage { return json.RawMessage(s) }

// result is what the clients of one model saw.
type result struct {
	mu      sync.Mutex
	lats    []time.Duration
	starts  []time.Time // of each latency in lats
	refused int         // 503 (and 429-like) answers
	failed  int         // any other failure
	skipped int         // paced ticks not sent: maxInFlight requests were out
}

func (r *result) record(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var se *statusError
	switch {
	case err == nil:
		r.lats = append(r.lats, d)
		r.starts = append(r.starts, time.Now().Add(-d))
	case errors.As(err, &se) && se.code == http.StatusServiceUnavailable:
		r.refused++
	default:
		r.failed++
	}
}

// during returns the latencies of the requests that were in flight at
// some moment of [from, to].
func (r *result) during(from, to time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for i, d := range r.lats {
		if s := r.starts[i]; !s.After(to) && !s.Add(d).Before(from) {
			out = append(out, d)
		}
	}
	return out
}

func (r *result) note() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ""
	if r.refused > 0 {
		s = fmt.Sprintf("%d refused", r.refused)
	}
	for _, c := range []struct {
		n    int
		what string
	}{{r.failed, "failed"}, {r.skipped, "not sent, 16 in flight"}} {
		if c.n == 0 {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%d %s", c.n, c.what)
	}
	return s
}

// loops starts n clients that send input to model back to back until stop
// is closed; each finishes the request it has in flight (so a request held
// for long is measured, not cut off). A refused request is retried after
// refusalPause, as a client honouring Retry-After would (shortened).
func loops(ctx context.Context, wg *sync.WaitGroup, c *client, model string, in json.RawMessage, n int, stop <-chan struct{}) *result {
	r := &result{}
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				d, err := c.infer(ctx, model, in)
				r.record(d, err)
				if err != nil {
					t := time.NewTimer(refusalPause)
					select {
					case <-t.C:
					case <-stop:
					case <-ctx.Done():
					}
					t.Stop()
				}
			}
		})
	}
	return r
}

const refusalPause = 20 * time.Millisecond

// maxInFlight bounds the outstanding requests of one paced stream.
const maxInFlight = 16

// paced sends input to model every interval, each request on its own,
// whether or not the earlier ones have finished (an open-loop stream, so a
// stall delays every request that arrives during it instead of only the
// one a closed-loop client has in flight), until stop is closed. At most
// maxInFlight of its requests are out at once: a tick beyond that sends
// nothing and counts as skipped, which bounds a design that stalls for
// good (the swap design thrashing) to a finite drain.
func paced(ctx context.Context, wg *sync.WaitGroup, c *client, model string, in json.RawMessage, interval time.Duration, stop <-chan struct{}) *result {
	r := &result{}
	slots := make(chan struct{}, maxInFlight)
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				select {
				case slots <- struct{}{}:
				default:
					r.mu.Lock()
					r.skipped++
					r.mu.Unlock()
					continue
				}
				wg.Go(func() {
					defer func() { <-slots }()
					r.record(c.infer(ctx, model, in))
				})
			}
		}
	})
	return r
}

// pause waits d or until ctx ends: the workloads' schedule of events.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func warm(ctx context.Context, c *client, models ...string) error {
	return warmWith(ctx, c, input(`{}`), models...)
}

// warmWith loads each model with one request of input in.
func warmWith(ctx context.Context, c *client, in json.RawMessage, models ...string) error {
	for _, m := range models {
		if _, err := c.infer(ctx, m, in); err != nil {
			return fmt.Errorf("warm-up of %s: %w", m, err)
		}
	}
	return nil
}

// fixtureWorkloads are the five workloads over the fixture engine.
func fixtureWorkloads() []workload {
	return []workload{
		{
			// (1) head-of-line blocking across models (ollama#14578): a
			// fast model's latency (a request every 25 ms) while a slow
			// model is busy and a third model cold-loads for 1 s (two
			// clients ask for it at once).
			name: "1 cross-model",
			env: func(e env) env {
				n := e.eng.Name()
				e.models = []modelDef{{"fast", fx(n, 2, 300, 5, "")}, {"slow", fx(n, 1, 300, 300, "")}, {"cold", fx(n, 1, 1000, 5, "")}}
				return e
			},
			run: func(ctx context.Context, c *client, e env, sz size) ([]figure, error) {
				if err := warm(ctx, c, "fast", "slow"); err != nil {
					return nil, err
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				loops(ctx, &wg, c, "slow", input(`{}`), 1, stop)
				fast := paced(ctx, &wg, c, "fast", input(`{}`), 25*time.Millisecond, stop)
				pause(ctx, sz.window/10)
				cold := &result{}
				for range 2 {
					wg.Go(func() { cold.record(c.infer(ctx, "cold", input(`{}`))) })
				}
				pause(ctx, sz.window)
				close(stop)
				wg.Wait()
				return []figure{
					{row: "1 fast model p50 (ms)", value: ms(pct(fast.lats, 50)), note: fast.note()},
					{row: "1 fast model p99 (ms)", value: ms(pct(fast.lats, 99))},
					{row: "1 cold model first answer (ms)", value: ms(pct(cold.lats, 0)), note: cold.note()},
				}, nil
			},
		},
		{
			// (2) short and long requests on one model of 2 slots
			// (whisper.cpp#1803): one client sends 400 ms requests, two
			// send 5 ms ones.
			name: "2 short-long",
			env: func(e env) env {
				e.models = []modelDef{{"m", fx(e.eng.Name(), 2, 0, 5, "")}}
				return e
			},
			run: func(ctx context.Context, c *client, e env, sz size) ([]figure, error) {
				return shortLong(ctx, c, sz, "m", input(`{"infer_ms":5}`), input(`{"infer_ms":400}`))
			},
		},
		{
			// (3) a reconfigure under a steady stream (ollama PR #14407):
			// a request every 20 ms on r (2 slots, 20 ms) and on o (5
			// ms); r's config changes (a 300 ms load) a tenth into the
			// window.
			name: "3 reconfigure",
			env: func(e env) env {
				n := e.eng.Name()
				e.models = []modelDef{{"r", fx(n, 2, 300, 20, "")}, {"o", fx(n, 1, 300, 5, "")}}
				return e
			},
			run: func(ctx context.Context, c *client, e env, sz size) ([]figure, error) {
				if err := warm(ctx, c, "r", "o"); err != nil {
					return nil, err
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				r := paced(ctx, &wg, c, "r", input(`{}`), 20*time.Millisecond, stop)
				o := paced(ctx, &wg, c, "o", input(`{}`), 20*time.Millisecond, stop)
				pause(ctx, sz.window/10)
				t0 := time.Now()
				err := c.do(ctx, http.MethodPut, "/v1/models/r", fx(e.eng.Name(), 2, 300, 20, `,"clone_ms":1`))
				took := time.Since(t0)
				pause(ctx, sz.window)
				close(stop)
				wg.Wait()
				if err != nil {
					return nil, fmt.Errorf("reconfigure: %w", err)
				}
				// "Meanwhile": the requests in flight at some moment of the
				// reconfigure.
				return []figure{
					{row: "3 reconfigure, until the new config serves (ms)", value: ms(took)},
					{row: "3 its model's p99 meanwhile (ms)", value: ms(pct(r.during(t0, t0.Add(took)), 99)), note: r.note()},
					{row: "3 another model's p99 meanwhile (ms)", value: ms(pct(o.during(t0, t0.Add(took)), 99)), note: o.note()},
				}, nil
			},
		},
		{
			// (4) a burst with a queue limit (ollama#7758): one slot of
			// 300 ms and a queue limit of 4, a burst of sz.burst requests
			// at once over warm connections; admitted beyond 1+4 must be 0.
			name: "4 burst",
			env: func(e env) env {
				e.models = []modelDef{{"b", fx(e.eng.Name(), 1, 0, 300, "")}}
				e.maxQueue = 4
				return e
			},
			run: func(ctx context.Context, c *client, e env, sz size) ([]figure, error) {
				if err := warm(ctx, c, "b"); err != nil {
					return nil, err
				}
				var wg sync.WaitGroup
				for range sz.burst { // open the connections: unknown models are a quick 404 everywhere
					wg.Go(func() { _, _ = c.infer(ctx, "none", input(`{}`)) })
				}
				wg.Wait()
				start := make(chan struct{})
				res := &result{}
				for range sz.burst {
					wg.Go(func() {
						<-start
						res.record(c.infer(ctx, "b", input(`{}`)))
					})
				}
				close(start)
				wg.Wait()
				beyond := max(0, len(res.lats)-(1+e.maxQueue))
				return []figure{{row: fmt.Sprintf("4 admitted beyond slots+queue limit (burst of %d, limit 1+%d)", sz.burst, e.maxQueue),
					value: float64(beyond), note: res.note()}}, nil
			},
		},
		{
			// (5) alternating requests over three models with room for
			// two (llama-swap#612): the sequence a,b,a,c repeated, one
			// client; 100 ms loads, 10 ms requests.
			name: "5 alternating",
			env: func(e env) env {
				n := e.eng.Name()
				e.models = []modelDef{{"a", fx(n, 1, 100, 10, "")}, {"b", fx(n, 1, 100, 10, "")}, {"c", fx(n, 1, 100, 10, "")}}
				e.room = 2
				return e
			},
			run: func(ctx context.Context, c *client, e env, sz size) ([]figure, error) {
				return alternating(ctx, c, e, sz, input(`{}`))
			},
		},
	}
}

// shortLong is workload (2) on model: one client of long requests, two of
// short ones, for the window.
func shortLong(ctx context.Context, c *client, sz size, model string, short, long json.RawMessage) ([]figure, error) {
	if err := warmWith(ctx, c, short, model); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loops(ctx, &wg, c, model, long, 1, stop)
	s := loops(ctx, &wg, c, model, short, 2, stop)
	pause(ctx, sz.window)
	close(stop)
	wg.Wait()
	return []figure{
		{row: "2 short requests p50 (ms)", value: ms(pct(s.lats, 50)), note: s.note()},
		{row: "2 short requests p99 (ms)", value: ms(pct(s.lats, 99))},
	}, nil
}

// alternating is workload (5): the sequence a,b,a,c for sz.seq requests
// from one client; loads counted by the engine, from cold.
func alternating(ctx context.Context, c *client, e env, sz size, in json.RawMessage) ([]figure, error) {
	order := []string{"a", "b", "a", "c"}
	res := &result{}
	loads0 := e.eng.Loads()
	for i := range sz.seq {
		res.record(c.infer(ctx, order[i%len(order)], in))
	}
	loads := e.eng.Loads() - loads0
	return []figure{
		{row: "5 loads per 100 requests", value: float64(loads) * 100 / float64(sz.seq), note: res.note()},
		{row: "5 request p99 (ms)", value: ms(pct(res.lats, 99))},
	}, nil
}
