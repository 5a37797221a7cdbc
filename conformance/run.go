package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// caseRun is one run of one case: its server, HTTP client, symbol table and
// asynchronous calls. It is used by one goroutine; the calls' goroutines
// only write their own call and close its done channel.
type caseRun struct {
	c      *Case
	base   string
	inst   Instance // the case's own server; nil on the shared one
	client *http.Client
	tr     *http.Transport
	ctx    context.Context
	cancel context.CancelFunc

	stepTimeout time.Duration
	slack       float64

	tag    string
	models map[string]bool // model symbols
	gates  map[string]bool // gate symbols
	calls  map[string]*call
	order  []string                     // call names in start order
	dirs   map[string]string            // folder symbols -> paths (folder steps)
	jars   map[string]map[string]string // cookie jars of http steps: name -> cookie name -> value
	wg     sync.WaitGroup
	line   int // of the running step

	liveMu sync.Mutex
	live   map[string]*websocket.Conn // live sessions by name (steps_live.go)

	// restart starts the case's own server again on the same flags and
	// state dir (restart and start steps); nil on the shared one.
	restart func() (Instance, error)
	// caseDir is the case's folder (state_dir cases): the state dir as
	// state/, and the files of file steps ($DIR in texts).
	caseDir string
	// servers are the case's running servers by name (start steps; the
	// runner's is main), cur the one inst is; lastLogs the log of the
	// last one stopped.
	servers   map[string]Instance
	cur       string
	lastLogs  string
	finishErr error // closing the servers finish closed
}

// serverlessSteps can run while the case has no server running.
var serverlessSteps = map[string]bool{"start": true, "file": true, "use": true, "situation": true}

func newCaseRun(c *Case, base string, inst Instance, tag string, stepTimeout time.Duration, slack float64) *caseRun {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	ctx, cancel := context.WithCancel(context.Background())
	r := &caseRun{c: c, base: base, inst: inst, tr: tr, client: &http.Client{Transport: tr}, ctx: ctx, cancel: cancel,
		stepTimeout: stepTimeout, slack: slack, tag: tag, models: map[string]bool{}, gates: map[string]bool{},
		calls: map[string]*call{}, dirs: map[string]string{}, jars: map[string]map[string]string{}, servers: map[string]Instance{}}
	if inst != nil {
		r.servers[mainServer], r.cur = inst, mainServer
	}
	r.collectSymbols()
	return r
}

// model maps a model symbol to the run's ID.
func (r *caseRun) model(sym string) string { return sym + "." + r.tag }

// gate maps a gate symbol to the run's gate name.
func (r *caseRun) gate(sym string) string { return sym + "." + r.tag }

// collectSymbols finds every model and gate symbol of the case.
func (r *caseRun) collectSymbols() {
	addGates := func(m map[string]any, keys ...string) {
		for _, k := range keys {
			if s, ok := m[k].(string); ok {
				r.gates[s] = true
			}
		}
	}
	for _, st := range r.c.Steps {
		switch a := st.Arg.(type) {
		case *PutStep:
			r.models[a.Model] = true
			for _, sym := range a.Aliases {
				r.models[sym] = true
			}
			if g, ok := a.Options["gates"].(map[string]any); ok {
				for _, v := range g {
					if s, ok := v.(string); ok {
						r.gates[s] = true
					}
				}
			}
		case *InferStep:
			r.models[a.Model] = true
			addGates(a.Input, "gate", "chunk_gate")
		case *StallStep:
			if a.Model != "" {
				r.models[a.Model] = true
			}
			addGates(a.Input, "gate", "chunk_gate")
		case *TargetStep:
			r.models[a.Model] = true
		case *BulkStep:
			for _, m := range a.Models {
				r.models[m] = true
			}
		case *ModelExpect:
			if s, ok := (*a)["model"].(string); ok {
				r.models[s] = true
			}
		case *ListStep:
			for _, m := range append(append([]string(nil), a.Has...), a.Absent...) {
				r.models[m] = true
			}
		case *GateStep:
			r.gates[a.Gate] = true
		case *RealtimeStep:
			r.models[a.Model] = true
		case *string:
			switch st.Kind {
			case "open":
				r.gates[*a] = true
			case "absent":
				r.models[*a] = true
			}
		}
	}
	// $NAME in raw paths and bodies names a gate when the case knows it as
	// one, a folder when a folder step makes it, else a model.
	folders := map[string]bool{}
	for _, st := range r.c.Steps {
		if f, ok := st.Arg.(*FolderStep); ok {
			folders[f.As] = true
		}
	}
	for _, st := range r.c.Steps {
		var texts []string
		switch a := st.Arg.(type) {
		case *HTTPStep:
			texts = []string{a.Path, a.Body}
		case *FileStep:
			texts = append(append(append(texts, a.Contains...), a.Absent...), a.Append)
			if a.Write != nil {
				texts = append(texts, *a.Write)
			}
			texts = append(texts, a.Replace...)
		case *StartStep:
			texts = a.Fails
		case *LogStep:
			texts = []string{a.Contains}
		}
		for _, m := range dollarRe.FindAllStringSubmatch(strings.Join(texts, " "), -1) {
			if !r.gates[m[1]] && !folders[m[1]] && m[1] != caseDirSymbol {
				r.models[m[1]] = true
			}
		}
	}
}

var dollarRe = regexp.MustCompile(`\$([A-Za-z][A-Za-z0-9_]*)`)

// caseDirSymbol, written $DIR, is the case's folder in texts.
const caseDirSymbol = "DIR"

// expand replaces $SYM in raw text by the mapped model or gate name.
func (r *caseRun) expand(s string) (string, error) {
	var err error
	out := dollarRe.ReplaceAllStringFunc(s, func(m string) string {
		sym := m[1:]
		switch {
		case r.models[sym]:
			return r.model(sym)
		case r.gates[sym]:
			return r.gate(sym)
		case r.dirs[sym] != "":
			return r.dirs[sym]
		case sym == caseDirSymbol && r.caseDir != "":
			return r.caseDir
		}
		err = fmt.Errorf("unknown symbol %s in %q", m, s)
		return m
	})
	return out, err
}

// mapValue maps strings equal to a model symbol inside an expected JSON
// value, and normalizes numbers the way encoding/json decodes them.
func (r *caseRun) mapValue(v any) any {
	switch x := v.(type) {
	case string:
		if r.models[x] {
			return r.model(x)
		}
		if d, ok := r.folderSymbol(x); ok {
			return d
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = r.mapValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.mapValue(e)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return v
}

// mapGates maps the gate fields of a fixture input or options object.
func (r *caseRun) mapInput(in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
		if s, ok := v.(string); ok && (k == "gate" || k == "chunk_gate") {
			out[k] = r.gate(s)
		}
	}
	return out
}

func (r *caseRun) mapOptions(o map[string]any) map[string]any {
	out := make(map[string]any, len(o))
	for k, v := range o {
		out[k] = v
		if g, ok := v.(map[string]any); ok && k == "gates" {
			m := make(map[string]any, len(g))
			for step, name := range g {
				if s, ok := name.(string); ok {
					m[step] = r.gate(s)
				} else {
					m[step] = name
				}
			}
			out[k] = m
		}
	}
	return out
}

// run runs every step; the first failure ends the case.
func (r *caseRun) run() error {
	for _, st := range r.c.Steps {
		r.line = st.Line
		if err := r.step(st); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", st.File, st.Line, st.Kind, err)
		}
	}
	var never []string
	for _, n := range r.order {
		if c := r.calls[n]; !c.awaited {
			never = append(never, n)
		}
	}
	if len(never) > 0 {
		return fmt.Errorf("%s: calls never awaited: %s (every asynchronous call must be awaited)", r.c.file, strings.Join(never, ", "))
	}
	return nil
}

// finish opens every gate of the case (so nothing it started stays held on
// a shared server), disconnects calls still running and joins them.
func (r *caseRun) finish() {
	names := make([]string, 0, len(r.gates))
	for g := range r.gates {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		if r.inst != nil {
			select {
			case <-r.inst.Done():
				continue
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rq := request{method: "POST", path: "/v1/fixture/gates/" + r.gate(g) + "/open"}
		if r.viaHandler() {
			_ = exchangeHandler(ctx, r.inst.Handler(), rq)
		} else {
			_ = exchange(ctx, r.client, r.base, rq, nil)
		}
		cancel()
	}
	r.closeLive()
	r.cancel()
	r.wg.Wait()
	if err := r.closeOthers(); err != nil {
		r.finishErr = err
	}
	r.tr.CloseIdleConnections()
	for _, d := range r.dirs {
		_ = os.RemoveAll(d)
	}
}

// step runs one step.
func (r *caseRun) step(st Step) error {
	if r.c.Server != nil && r.inst == nil && !serverlessSteps[st.Kind] {
		return errors.New("no server of the case runs (a stop step stopped it): start one first")
	}
	if ok, err := r.liveStep(st); ok {
		return err
	}
	switch a := st.Arg.(type) {
	case *PutStep:
		return r.put(a)
	case *InferStep:
		return r.infer(a)
	case *TargetStep:
		return r.send(request{method: "POST", path: "/v1/models/" + r.model(a.Model) + "/" + st.Kind}, a.Call, "")
	case *BulkStep:
		ids := make([]string, len(a.Models))
		for i, m := range a.Models {
			ids[i] = r.model(m)
		}
		b, _ := json.Marshal(map[string]any{"models": ids})
		return r.send(request{method: "POST", path: "/v1/models/unload", body: b}, a.Call, "")
	case *HTTPStep:
		return r.raw(a)
	case *GateStep:
		return r.awaitGate(a)
	case *ModelExpect:
		if st.Kind == "await_model" {
			return r.awaitModel(*a)
		}
		return r.expectModel(*a)
	case *ListStep:
		return r.list(a)
	case *[]string:
		return r.pending(*a)
	case *AwaitStep:
		return r.await(a)
	case *ChunkStep:
		return r.awaitChunks(a)
	case *ShutdownStep:
		return r.inst.Shutdown(a.Signal)
	case *ExitStep:
		return r.exited(a)
	case *LogStep:
		return r.logCheck(a)
	case *StallStep:
		return r.stall(a)
	case *bool:
		return r.refused()
	case *int:
		return r.sessions(*a)
	case *TeardownStep:
		return r.teardowns(a)
	case *FolderStep:
		return r.folder(a)
	case *RestartStep:
		return r.restartServer(a)
	case *StopStep:
		return r.stopServer(a)
	case *StartStep:
		return r.startServer(a)
	case *FileStep:
		return r.fileStep(a)
	case *CrashLoopStep:
		return r.crashLoop(a)
	case *string:
		switch st.Kind {
		case "use":
			return r.useServer(*a)
		case "open":
			return r.open(*a)
		case "absent":
			return r.absent(*a)
		case "disconnect":
			return r.disconnect(*a)
		case "signal":
			return r.inst.Signal(*a)
		}
	}
	return fmt.Errorf("step %s not implemented", st.Kind)
}

// deadline returns the context of one bounded wait.
func (r *caseRun) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, r.stepTimeout)
}

// viaHandler reports whether requests go to the in-process handler: once
// the case's own server began its shutdown its listener is closed.
func (r *caseRun) viaHandler() bool {
	return r.inst != nil && r.inst.Handler() != nil && !r.inst.ShutdownBegan().IsZero()
}

// do performs one synchronous request.
func (r *caseRun) do(req request) answer {
	ctx, cancel := r.bounded()
	defer cancel()
	if r.viaHandler() {
		return exchangeHandler(ctx, r.inst.Handler(), req)
	}
	return exchange(ctx, r.client, r.base, req, nil)
}

// send performs req synchronously (checking c.Expect, default 200) or
// starts it asynchronously when c.As is set. via "handler" uses the
// in-process handler.
func (r *caseRun) send(req request, c Call, via string) error {
	if r.viaHandler() {
		via = "handler"
	}
	if via == "handler" && (r.inst == nil || r.inst.Handler() == nil) {
		return errors.New("via handler needs the case's own in-process server")
	}
	if c.As == "" {
		var a answer
		if via == "handler" {
			ctx, cancel := r.bounded()
			a = exchangeHandler(ctx, r.inst.Handler(), req)
			cancel()
		} else {
			a = r.do(req)
		}
		return r.check(&a, c.Expect)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	cl := &call{name: c.As, cancel: cancel, done: make(chan struct{})}
	r.calls[c.As] = cl
	r.order = append(r.order, c.As)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(cl.done)
		if via == "handler" {
			cl.ans = exchangeHandler(ctx, r.inst.Handler(), req)
		} else {
			cl.ans = exchange(ctx, r.client, r.base, req, cl)
		}
		if ctx.Err() != nil && cl.ans.err != nil {
			cl.ans.disconnected = true
		}
	}()
	return nil
}

// waitFor polls cond until it holds or the step timeout passes. The
// backoff starts at 1 ms and grows to 20 ms: it bounds how often the
// server is asked, it never decides an ordering.
func (r *caseRun) waitFor(what string, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(r.stepTimeout)
	wait := time.Millisecond
	last := ""
	for {
		ok, seen, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		last = seen
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", r.stepTimeout, what, last)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return r.ctx.Err()
		}
		wait = min(wait*2, 20*time.Millisecond)
	}
}

func (r *caseRun) callNamed(name string) (*call, error) {
	c, ok := r.calls[name]
	if !ok {
		return nil, fmt.Errorf("no call %q", name)
	}
	return c, nil
}
