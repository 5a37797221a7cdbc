package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
)

// Linearizability over HTTP: several clients run random mixes of
// inference, PUT (register and reconfigure), load, unload, bulk unload and
// status against the target, on three models of their own, with fixture
// latencies of a few milliseconds, injected failures, admission timeouts,
// queue limits and clients that go away. Each history is checked by
// porcupine against the sequential model of linmodel.go; calls whose client
// went away have unknown outcomes. A history that is not linearizable is
// written as porcupine's HTML visualization.

// LinOptions configure RunLin.
type LinOptions struct {
	// Target is the server's base URL (with --ui-management --fixture).
	Target string
	// Histories is how many histories to run and check.
	Histories int
	// Seed is the first history's seed (0: from the clock).
	Seed int64
	// OutDir receives the visualization of a failed history (default:
	// the temporary folder).
	OutDir string
	// Tag makes the history's model IDs unique on the target.
	Tag string

	_ struct{}
}

// LinReport is the outcome of the linearizability check.
type LinReport struct {
	Histories  int      `json:"histories"`
	Operations int      `json:"operations"`
	Failed     int      `json:"failed"`
	Seed       int64    `json:"seed"`
	Files      []string `json:"files,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// OK reports whether every history was linearizable.
func (l *LinReport) OK() bool { return l.Failed == 0 && l.Error == "" }

// RunLin runs and checks o.Histories histories one after another.
func RunLin(o LinOptions) LinReport {
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano() % 1e9
	}
	if o.Tag == "" {
		o.Tag = NewRunTag()
	}
	rep := LinReport{Seed: o.Seed}
	var msgs []string
	for i := range o.Histories {
		seed := o.Seed + int64(i)
		h, err := runLinHistory(o.Target, fmt.Sprintf("h%d.%s", i, o.Tag), seed)
		if err != nil {
			rep.Error = fmt.Sprintf("seed %d: %v", seed, err)
			return rep
		}
		rep.Histories++
		rep.Operations += len(h.ops)
		model := h.spec.model()
		res, info := porcupine.CheckOperationsVerbose(model, h.ops, time.Minute)
		if res == porcupine.Ok {
			continue
		}
		rep.Failed++
		dir := o.OutDir
		if dir == "" {
			dir = os.TempDir()
		}
		path := filepath.Join(dir, fmt.Sprintf("sluice-conformance-lin-%d.html", seed))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			path = "(not written: " + err.Error() + ")"
		} else {
			rep.Files = append(rep.Files, path)
		}
		msgs = append(msgs, fmt.Sprintf("seed %d: history of %d operations is %s; visualization: %s", seed, len(h.ops), res, path))
	}
	rep.Error = strings.Join(msgs, "\n")
	return rep
}

type linHistory struct {
	spec linSpec
	ids  [linModels + 1]string
	mu   sync.Mutex
	ops  []porcupine.Operation
	clk  atomic.Int64
}

func (h *linHistory) add(client int, in linInput, out linOutput, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if out.unknown {
		ret = 1 << 40
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// genLinConfigs draws a history's config table: three option families
// and six configs over them.
func genLinConfigs(rng *rand.Rand) []linCfg {
	type family struct {
		capacity            int
		failLoad, failProbe bool
		failClone           int
		opts                string
	}
	fams := make([]family, 3)
	for f := range fams {
		x := family{capacity: 3 + rng.IntN(2), failLoad: rng.IntN(10) == 0, failProbe: rng.IntN(7) == 0}
		if rng.IntN(4) == 0 {
			x.capacity = 1 + rng.IntN(2)
		}
		if rng.IntN(10) == 0 {
			x.failClone = 1 + rng.IntN(2)
		}
		x.opts = fmt.Sprintf(`{"capacity":%d,"fail_load":%v,"fail_probe":%v,"fail_clone_at":%d,"load_ms":%d,"clone_ms":%d,"probe_ms":%d,"teardown_ms":%d,"infer_ms":%d,"memory_mb":%d}`,
			x.capacity, x.failLoad, x.failProbe, x.failClone, rng.IntN(3), rng.IntN(2), rng.IntN(2), rng.IntN(3), rng.IntN(3), f+1)
		fams[f] = x
	}
	cfgs := make([]linCfg, 6)
	for i := range cfgs {
		f := rng.IntN(len(fams))
		x := fams[f]
		c := linCfg{family: f, slots: 1 + rng.IntN(3), capacity: x.capacity, failLoad: x.failLoad, failProbe: x.failProbe,
			failClone: x.failClone, optionJSON: x.opts}
		if rng.IntN(5) == 0 {
			c.admission = 1 + rng.IntN(3)
		}
		if rng.IntN(10) == 0 {
			c.maxQueue = 1 + rng.IntN(2)
		}
		c.invalid = rng.IntN(25) == 0
		cfgs[i] = c
	}
	return cfgs
}

func (c *linCfg) body() []byte {
	spec := map[string]any{"engine": "fixture", "task": "tts", "slots": c.slots, "options": json.RawMessage(c.optionJSON)}
	if c.invalid {
		spec["slots"] = 17
	}
	if c.admission > 0 {
		spec["admission_timeout_ms"] = c.admission
	}
	if c.maxQueue > 0 {
		spec["max_queue"] = c.maxQueue
	}
	b, _ := json.Marshal(spec)
	return b
}

// runLinHistory runs one random workload against base.
func runLinHistory(base, tag string, seed int64) (*linHistory, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	h := &linHistory{spec: linSpec{cfgs: genLinConfigs(rng)}}
	for i := range linModels {
		h.ids[i] = fmt.Sprintf("lin%c.%s", 'a'+i, tag)
	}
	h.ids[linModels] = "linz." + tag // never registered
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	clients := 3 + rng.IntN(3)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		crng := rand.New(rand.NewPCG(uint64(seed), uint64(c+1)))
		nops := 3 + crng.IntN(5)
		wg.Go(func() {
			for k := range nops {
				force := linKind(0)
				if k == 0 && crng.IntN(2) == 0 {
					force = linApply // register early
				}
				if err := h.runOp(client, base, c, crng, force); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return h, nil
}

// codeOf maps an answer to the core's outcome code. An exchange that
// failed, before or after the status line (a client that goes away while
// the body is read), has an unknown outcome.
func codeOf(a *answer) (core.Code, bool) {
	if a.err != nil {
		return core.CodeCancelled, true
	}
	if a.status == 200 {
		return core.CodeOK, false
	}
	var eb struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(a.body, &eb)
	switch eb.Error.Type {
	case "server_busy":
		return core.CodeServerBusy, false
	case "shutting_down":
		return core.CodeShuttingDown, false
	case "invalid_request_error":
		return core.CodeInvalid, false
	case "not_found_error":
		return core.CodeNotFound, false
	}
	return core.CodeBackend, false
}

// modelRow reads a model object into a row of this history.
func (h *linHistory) modelRow(m map[string]any) (linRow, bool) {
	id, _ := m["id"].(string)
	for i := range linModels {
		if h.ids[i] == id {
			v, _ := m["config_version"].(float64)
			s, _ := m["slots"].(float64)
			return linRow{id: i, version: uint64(v), slots: int(s)}, true
		}
	}
	return linRow{}, false
}

// linCallLimit bounds every call of a history.
const linCallLimit = 10 * time.Second

func (h *linHistory) runOp(client *http.Client, base string, cl int, rng *rand.Rand, force linKind) (err error) {
	var hung atomic.Bool
	defer func() {
		if err == nil && hung.Load() {
			err = fmt.Errorf("a call did not finish within %s", linCallLimit)
		}
	}()
	model := rng.IntN(linModels)
	if rng.IntN(30) == 0 {
		model = linModels
	}
	// Every call is bounded: a correct server answers a history's calls
	// in milliseconds, so one that hangs is a failure of its own.
	bctx, bcancel := context.WithTimeout(context.Background(), linCallLimit)
	defer bcancel()
	ctx := bctx
	if rng.IntN(12) == 0 { // the client goes away after 0..3 ms
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(bctx, time.Duration(rng.IntN(4))*time.Millisecond)
		defer cancel()
	}
	defer func() {
		if bctx.Err() != nil && !hung.Load() {
			hung.Store(true)
		}
	}()
	in := linInput{model: model}
	var out linOutput
	var read *linRow
	call := h.clk.Add(1)
	p := rng.IntN(100)
	if force == linApply {
		p = 50
	}
	path := func(suffix string) string { return "/v1/models/" + h.ids[in.model] + suffix }
	switch {
	case p < 45:
		in.kind = linInfer
		in.fail = rng.IntN(10) == 0
		req := map[string]any{"input": map[string]any{"fail": in.fail}}
		switch rng.IntN(10) {
		case 0, 1, 2:
			req["admission_timeout_ms"] = 1 + rng.IntN(3)
		case 3:
			req["admission_timeout_ms"] = 0
		}
		if rng.IntN(3) == 0 {
			req["input"] = map[string]any{"fail": in.fail, "infer_ms": rng.IntN(4)}
		}
		b, _ := json.Marshal(req)
		a := exchange(ctx, client, base, request{method: "POST", path: path("/infer"), body: b}, nil)
		out.code, out.unknown = codeOf(&a)
		if out.code == core.CodeOK {
			var res struct {
				ConfigVersion uint64 `json:"config_version"`
				Slot          int    `json:"slot"`
				Output        struct {
					Model         string `json:"model"`
					ConfigVersion uint64 `json:"config_version"`
					Slot          int    `json:"slot"`
				} `json:"output"`
			}
			if err := json.Unmarshal(a.body, &res); err != nil {
				return fmt.Errorf("inference answer %s: %w", a.body, err)
			}
			if res.Output.Model != h.ids[in.model] || res.Output.ConfigVersion != res.ConfigVersion || res.Output.Slot != res.Slot {
				return fmt.Errorf("inference answer names another model, version or slot than it ran on: %s", a.body)
			}
			out.version, out.slot = res.ConfigVersion, res.Slot
		}
	case p < 65:
		in.kind = linApply
		in.cfg = rng.IntN(len(h.spec.cfgs))
		if in.model == linModels {
			in.model = 0
		}
		a := exchange(ctx, client, base, request{method: "PUT", path: path(""), body: h.spec.cfgs[in.cfg].body()}, nil)
		out.code, out.unknown = codeOf(&a)
		read = h.readRow(&a, out.code)
	case p < 80:
		in.kind = linUnload
		suffix := "/unload"
		if p < 70 {
			in.kind, suffix = linLoad, "/load"
		}
		a := exchange(ctx, client, base, request{method: "POST", path: path(suffix), body: []byte{}}, nil)
		out.code, out.unknown = codeOf(&a)
		if in.kind == linLoad {
			read = h.readRow(&a, out.code)
		}
	case p < 88:
		var idx []int
		for i := range linModels + 1 {
			if rng.IntN(2) == 0 {
				idx = append(idx, i)
			}
		}
		if len(idx) > 1 && rng.IntN(3) == 0 {
			idx = append(idx, idx[0]) // a duplicate counts once
		}
		ids := make([]string, len(idx))
		for k, i := range idx {
			ids[k] = h.ids[i]
		}
		b, _ := json.Marshal(map[string]any{"models": ids})
		a := exchange(ctx, client, base, request{method: "POST", path: "/v1/models/unload", body: b}, nil)
		ret := h.clk.Add(1)
		code, unknown := codeOf(&a)
		if unknown && ctx.Err() == nil {
			return fmt.Errorf("bulk unload failed although its client stayed: %s", a.summary())
		}
		var res struct {
			Unloaded []string `json:"unloaded"`
		}
		if code == core.CodeOK {
			_ = json.Unmarshal(a.body, &res)
		} else if !unknown {
			return fmt.Errorf("bulk unload %v: %s", ids, a.summary())
		}
		seen := map[int]bool{}
		for _, i := range idx {
			if seen[i] {
				continue
			}
			seen[i] = true
			mo := linOutput{code: code, unknown: unknown}
			for _, u := range res.Unloaded {
				mo.found = mo.found || u == h.ids[i]
			}
			h.add(cl, linInput{kind: linBulkMember, model: i}, mo, call, ret)
		}
		return nil
	default:
		in.kind = linStatus
		a := exchange(ctx, client, base, request{method: "GET", path: "/v1/models"}, nil)
		code, unknown := codeOf(&a)
		out.unknown = unknown
		if !unknown {
			if code != core.CodeOK {
				return fmt.Errorf("status: %s", a.summary())
			}
			var list struct {
				Data []map[string]any `json:"data"`
			}
			if err := json.Unmarshal(a.body, &list); err != nil {
				return fmt.Errorf("status: %w", err)
			}
			for _, m := range list.Data {
				if row, ok := h.modelRow(m); ok {
					out.rows = append(out.rows, row)
				}
			}
		}
	}
	ret := h.clk.Add(1)
	if out.unknown && ctx.Err() == nil {
		return fmt.Errorf("%s on %s failed although its client stayed: the server went away", linKindNames[in.kind], h.ids[in.model])
	}
	h.add(cl, in, out, call, ret)
	if read != nil {
		// The status a manager returned was read when it finished, within
		// its interval: a one-model status read.
		h.add(cl, linInput{kind: linStatusOne, model: in.model}, linOutput{rows: []linRow{*read}}, call, ret)
	}
	return nil
}

// readRow is the model object a PUT or load answered with.
func (h *linHistory) readRow(a *answer, code core.Code) *linRow {
	if code != core.CodeOK {
		return nil
	}
	m, ok := decodeJSON(a.body).(map[string]any)
	if !ok {
		return nil
	}
	if row, ok := h.modelRow(m); ok {
		return &row
	}
	return nil
}
