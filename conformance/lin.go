package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/internal/linmodel"
)

// Linearizability over HTTP: several clients run random mixes of
// inference, PUT (register and reconfigure), load, unload, bulk unload and
// status against the target, on three models of their own, with fixture
// latencies of a few milliseconds, injected failures, admission timeouts,
// queue limits and clients that go away. Each history is checked by
// porcupine against the sequential model of internal/linmodel (the one the
// live-runtime check uses, without memory: the model object does not show
// it); calls whose client went away have unknown outcomes. A history that is
// not linearizable is written as porcupine's HTML visualization.

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
		rep.Operations += h.Len()
		dir := o.OutDir
		if dir == "" {
			dir = os.TempDir()
		}
		path := filepath.Join(dir, fmt.Sprintf("sluice-conformance-lin-%d.html", seed))
		res, err := h.Check(path)
		if res == porcupine.Ok {
			continue
		}
		rep.Failed++
		if err != nil {
			path = "(not written: " + err.Error() + ")"
		} else {
			rep.Files = append(rep.Files, path)
		}
		msgs = append(msgs, fmt.Sprintf("seed %d: history of %d operations is %s; visualization: %s", seed, h.Len(), res, path))
	}
	rep.Error = strings.Join(msgs, "\n")
	return rep
}

// linHistory is one recorded history and the IDs of its models on the
// target.
type linHistory struct {
	*linmodel.History
	ids [linmodel.Models + 1]string // the last is never registered
}

// index is the model index of id, -1 for an ID not of this history.
func (h *linHistory) index(id string) int { return slices.Index(h.ids[:], id) }

// linBody is the PUT body of config c.
func linBody(c *linmodel.Config) []byte {
	spec := map[string]any{"engine": "fixture", "task": "tts", "slots": c.Slots, "options": json.RawMessage(c.OptionJSON)}
	if c.Invalid {
		spec["slots"] = 17
	}
	if c.Admission > 0 {
		spec["admission_timeout_ms"] = c.Admission
	}
	if c.MaxQueue > 0 {
		spec["max_queue"] = c.MaxQueue
	}
	b, _ := json.Marshal(spec)
	return b
}

// runLinHistory runs one random workload against base.
func runLinHistory(base, tag string, seed int64) (*linHistory, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	// The model object shows no memory; the target's default admission
	// timeout and residency limits are unknown, so any wait, a registering
	// PUT included, may be refused with server_busy; a failed load backs
	// off (the server's default, CONTRACT.md fail.load-backoff).
	h := &linHistory{History: &linmodel.History{Spec: linmodel.Spec{Configs: linmodel.GenConfigs(rng), BusyRegister: true, Backoff: true}}}
	for i := range h.ids {
		h.ids[i] = "lin" + linmodel.Name(i) + "." + tag
	}
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
				force := linmodel.Kind(0)
				if k == 0 && crng.IntN(2) == 0 {
					force = linmodel.Apply // register early
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

// modelRow reads a model object into a row of this history (the ID that is
// never registered included: it must never appear); false for another
// client's model.
func (h *linHistory) modelRow(m map[string]any) (linmodel.Row, bool) {
	id, _ := m["id"].(string)
	i := h.index(id)
	if i < 0 {
		return linmodel.Row{}, false
	}
	v, _ := m["config_version"].(float64)
	s, _ := m["slots"].(float64)
	return linmodel.Row{Model: i, Version: uint64(v), Slots: int(s)}, true
}

// linCallLimit bounds every call of a history.
const linCallLimit = 10 * time.Second

func (h *linHistory) runOp(client *http.Client, base string, cl int, rng *rand.Rand, force linmodel.Kind) (err error) {
	var hung atomic.Bool
	defer func() {
		if err == nil && hung.Load() {
			err = fmt.Errorf("a call did not finish within %s", linCallLimit)
		}
	}()
	model := rng.IntN(linmodel.Models)
	if rng.IntN(30) == 0 {
		model = linmodel.Models
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
	in := linmodel.Input{Model: model, Busy: true}
	var out linmodel.Output
	var read *linmodel.Row
	call := h.Now()
	p := rng.IntN(100)
	if force == linmodel.Apply {
		p = 50
	}
	path := func(suffix string) string { return "/v1/models/" + h.ids[in.Model] + suffix }
	switch {
	case p < 45:
		in.Kind = linmodel.Infer
		in.Fail = rng.IntN(10) == 0
		req := map[string]any{"input": map[string]any{"fail": in.Fail}}
		switch rng.IntN(10) {
		case 0, 1, 2:
			req["admission_timeout_ms"] = 1 + rng.IntN(3)
		case 3:
			req["admission_timeout_ms"] = 0
		}
		if rng.IntN(3) == 0 {
			req["input"] = map[string]any{"fail": in.Fail, "infer_ms": rng.IntN(4)}
		}
		b, _ := json.Marshal(req)
		a := exchange(ctx, client, base, request{method: "POST", path: path("/infer"), body: b}, nil)
		out.Code, out.Unknown = codeOf(&a)
		if out.Code == core.CodeOK {
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
			if res.Output.Model != h.ids[in.Model] || res.Output.ConfigVersion != res.ConfigVersion || res.Output.Slot != res.Slot {
				return fmt.Errorf("inference answer names another model, version or slot than it ran on: %s", a.body)
			}
			out.Version, out.Slot = res.ConfigVersion, res.Slot
		}
	case p < 65:
		in.Kind = linmodel.Apply
		in.Config = rng.IntN(len(h.Spec.Configs))
		if in.Model == linmodel.Models {
			in.Model = 0
		}
		a := exchange(ctx, client, base, request{method: "PUT", path: path(""), body: linBody(&h.Spec.Configs[in.Config])}, nil)
		out.Code, out.Unknown = codeOf(&a)
		read = h.readRow(&a, out.Code)
	case p < 80:
		in.Kind = linmodel.Unload
		suffix := "/unload"
		if p < 70 {
			in.Kind, suffix = linmodel.Load, "/load"
		}
		a := exchange(ctx, client, base, request{method: "POST", path: path(suffix), body: []byte{}}, nil)
		out.Code, out.Unknown = codeOf(&a)
		if in.Kind == linmodel.Load {
			read = h.readRow(&a, out.Code)
		}
	case p < 88:
		idx := linmodel.DrawBulk(rng)
		ids := make([]string, len(idx))
		for k, i := range idx {
			ids[k] = h.ids[i]
		}
		b, _ := json.Marshal(map[string]any{"models": ids})
		a := exchange(ctx, client, base, request{method: "POST", path: "/v1/models/unload", body: b}, nil)
		ret := h.Now()
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
		var unloaded []int
		for _, u := range res.Unloaded {
			unloaded = append(unloaded, h.index(u))
		}
		h.AddBulk(cl, idx, code, unknown, unloaded, call, ret)
		return nil
	default:
		in.Kind = linmodel.Status
		a := exchange(ctx, client, base, request{method: "GET", path: "/v1/models"}, nil)
		code, unknown := codeOf(&a)
		out.Unknown = unknown
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
					out.Rows = append(out.Rows, row)
				}
			}
		}
	}
	ret := h.Now()
	if out.Unknown && ctx.Err() == nil {
		return fmt.Errorf("%s on %s failed although its client stayed: the server went away", in.Kind, h.ids[in.Model])
	}
	h.Add(cl, in, out, call, ret)
	if read != nil {
		// The status a manager returned was read when it finished, within
		// its interval: a one-model status read.
		h.AddRead(cl, in.Model, *read, call, ret)
	}
	return nil
}

// readRow is the model object a PUT or load answered with.
func (h *linHistory) readRow(a *answer, code core.Code) *linmodel.Row {
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
