package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/server"
)

// modelDef is one model of a workload, in Sluice's spec shape.
type modelDef struct {
	ID   string
	Spec specBody
}

// env is what a workload gives every design: the engine (wrapped to count
// loads; one per design and run), the models, the residency room (most
// models resident at once, 0: no limit), the queue limit (0: the design's
// default) and the models root of a real engine's checkpoints.
type env struct {
	eng      *countingEngine
	models   []modelDef
	room     int
	maxQueue int
	root     string
}

func (e env) specs() models {
	m := models{}
	for _, d := range e.models {
		m[d.ID] = d.Spec.backendSpec(d.ID, e.root, 1)
	}
	return m
}

// design is one scheduling design: it serves env over loopback and returns
// the base URL and a stop function. Every model starts unloaded.
type design struct {
	name  string
	about string // the peer's file it imitates
	start func(env) (string, func(), error)
}

var designs = []design{
	{name: "sluice", about: "this repository's server, in process", start: startSluice},
	{name: "serial", about: "whisper.cpp examples/server/server.cpp (whisper_mutex)", start: func(e env) (string, func(), error) {
		return serveFront(newSerial(e.eng, e.specs(), e.room), e.root)
	}},
	{name: "ollama", about: "ollama server/sched.go (Scheduler)", start: func(e env) (string, func(), error) {
		return serveFront(newOllamaLike(e.eng, e.specs(), e.room, e.maxQueue, nil), e.root)
	}},
	{name: "swap", about: "llama-swap proxy/processgroup.go, proxy/process.go (swap group)", start: func(e env) (string, func(), error) {
		return serveFront(newSwapLike(e.eng, e.specs(), e.maxQueue, nil), e.root)
	}},
}

// startSluice runs the real server in process with the env's engine, its
// room as --max-loaded-models and its queue limit as each model's
// max_queue; the models are registered (which loads them) and then
// unloaded, so that every design starts cold.
func startSluice(e env) (string, func(), error) {
	cfg := server.DefaultConfig()
	cfg.ParallelJobs, cfg.UIManagement = true, true
	cfg.MaxLoadedModels = e.room
	cfg.ModelsRoot = e.root
	cfg.LoadBackoff = 0
	s, err := server.New(cfg, server.Options{Logger: slog.New(slog.DiscardHandler),
		Engines: backends.Registry{e.eng.Name(): e.eng}})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	}
	base := "http://" + ln.Addr().String()
	c := newClient(base)
	for _, m := range e.models {
		spec := m.Spec
		if e.maxQueue > 0 {
			q := e.maxQueue
			spec.MaxQueue = &q
		}
		if err := c.do(context.Background(), http.MethodPut, "/v1/models/"+m.ID, spec); err != nil {
			stop()
			return "", nil, fmt.Errorf("register %s: %w", m.ID, err)
		}
		if err := c.do(context.Background(), http.MethodPost, "/v1/models/"+m.ID+"/unload", struct{}{}); err != nil {
			stop()
			return "", nil, fmt.Errorf("unload %s: %w", m.ID, err)
		}
	}
	return base, stop, nil
}

// client is the workloads' HTTP client: keep-alive connections, JSON
// bodies.
type client struct {
	base string
	hc   *http.Client
}

func newClient(base string) *client {
	return &client{base: base, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
}

func (c *client) closeIdle() { c.hc.CloseIdleConnections() }

// statusError is a non-200 answer.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.code, e.body) }

// do sends one JSON request and fails on any status but 200.
func (c *client) do(ctx context.Context, method, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != http.StatusOK {
		return &statusError{code: res.StatusCode, body: string(bytes.TrimSpace(rb))}
	}
	return nil
}

// infer sends one inference request with input (JSON) and returns its
// latency.
func (c *client) infer(ctx context.Context, model string, input json.RawMessage) (time.Duration, error) {
	t0 := time.Now()
	err := c.do(ctx, http.MethodPost, "/v1/models/"+model+"/infer", inferBody{Input: input})
	return time.Since(t0), err
}

// rootPath makes a models root absolute (the stand-ins join checkpoints
// under it).
func rootPath(root string) string {
	if root == "" {
		return ""
	}
	if abs, err := filepath.Abs(root); err == nil {
		return abs
	}
	return root
}
