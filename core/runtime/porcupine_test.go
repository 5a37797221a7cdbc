package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/internal/linmodel"
)

// Linearizability: many clients run random mixes of inference, register,
// reconfigure, load, unload, bulk unload and status on three models, with
// random fixture latencies and injected failures at every step, admission
// timeouts, full queues and clients that go away. Each history is checked
// by porcupine against the sequential model of internal/linmodel; operations
// whose caller went away have unknown outcomes (porcupine's treatment of
// timed-out calls: they may take effect at any time after their call).
//
// Every history runs in its own synctest bubble: fixture latencies are
// virtual, so a history costs microseconds of real time while goroutines
// still interleave for real. SLUICE_PORCUPINE_HISTORIES sets the number of
// histories (default 1000; `make stress` runs 100000) and
// SLUICE_PORCUPINE_SEED the first seed (default: the clock). A failure
// prints the seed and writes porcupine's HTML visualization.

func envInt(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
	}
	return def
}

func TestLinearizable(t *testing.T) {
	n := envInt("SLUICE_PORCUPINE_HISTORIES", 1000)
	base := envInt("SLUICE_PORCUPINE_SEED", time.Now().UnixNano()%1e9)
	t.Logf("%d histories from seed %d (SLUICE_PORCUPINE_SEED=%d reproduces the schedule of workloads)", n, base, base)
	workers := int64(max(runtime.GOMAXPROCS(0), 1))
	var done, ops atomic.Int64
	t.Run("histories", func(t *testing.T) {
		for w := range workers {
			t.Run(fmt.Sprint("worker", w), func(t *testing.T) {
				t.Parallel()
				for i := w; i < n && !t.Failed(); i += workers {
					seed := base + i
					var h *linmodel.History
					synctest.Test(t, func(t *testing.T) { h = runHistory(t, seed, 0) })
					if t.Failed() {
						t.Logf("seed %d", seed)
						return
					}
					if res, msg := checkHistory(seed, h); res != porcupine.Ok {
						t.Error(msg)
					}
					done.Add(1)
					ops.Add(int64(h.Len()))
				}
			})
		}
	})
	t.Logf("%d histories, %d operations checked", done.Load(), ops.Load())
	if done.Load() != n && !t.Failed() {
		t.Fatalf("checked %d of %d histories", done.Load(), n)
	}
}

// linIDs are the IDs of the history's models; "z" is never registered.
var linIDs = [linmodel.Models + 1]string{"a", "b", "c", "z"}

// linIndex is the model index of id, -1 for an ID not of the history.
func linIndex(id string) int { return slices.Index(linIDs[:], id) }

// linRow is the status row of st.
func linRow(st core.ModelStatus) linmodel.Row {
	return linmodel.Row{Model: linIndex(st.ID), Version: st.ConfigVersion, Slots: st.Slots, MemoryMB: st.MemoryMB}
}

// modelSpec is the runtime spec of config c.
func modelSpec(c *linmodel.Config) ModelSpec {
	s := ModelSpec{Engine: "fixture", Task: "tts", Checkpoint: "ck", Slots: c.Slots, Options: json.RawMessage(c.OptionJSON),
		MaxQueue: c.MaxQueue}
	if c.Admission > 0 {
		d := time.Duration(c.Admission) * time.Millisecond
		s.AdmissionTimeout = &d
	}
	if c.Invalid {
		s.Slots = core.MaxSlots + 1
	}
	return s
}

// runHistory runs one workload inside a synctest bubble and records it.
// With mutants (planted core bugs) the core's invariants are not checked,
// so that only porcupine can notice.
func runHistory(t *testing.T, seed int64, mutants core.Mutants) *linmodel.History {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	// The runtime's status shows memory; server_busy only ends a bounded
	// wait on a registered model (no residency limit here) or a load's
	// backoff (CONTRACT.md fail.load-backoff; 2 ms of the bubble's time,
	// doubling to 8 ms).
	h := &linmodel.History{Spec: linmodel.Spec{Configs: linmodel.GenConfigs(rng), Memory: true, Backoff: true}}
	backoff := core.Options{LoadBackoff: int64(2 * time.Millisecond), LoadBackoffMax: int64(8 * time.Millisecond)}
	anyAdmission, anyQueue := false, false
	for _, c := range h.Spec.Configs {
		anyAdmission = anyAdmission || c.Admission > 0
		anyQueue = anyQueue || c.MaxQueue > 0
	}
	var e *env
	if mutants != 0 {
		backoff.Mutants = mutants
		e = newEnv(t, backoff, withoutChecks())
	} else {
		e = newEnv(t, backoff, withTraceName(fmt.Sprintf("TestLinearizable-seed%d", seed)))
	}
	clients := 3 + rng.IntN(3)
	var wg sync.WaitGroup
	for c := range clients {
		crng := rand.New(rand.NewPCG(uint64(seed), uint64(c+1)))
		nops := 3 + crng.IntN(5)
		wg.Go(func() {
			for k := range nops {
				if d := crng.IntN(4); d > 0 {
					fakeTime(time.Duration(d-1) * time.Millisecond)
				}
				if k == 0 && crng.IntN(2) == 0 {
					runOp(t, e, h, c, crng, anyAdmission, anyQueue, linmodel.Apply) // register early
					continue
				}
				runOp(t, e, h, c, crng, anyAdmission, anyQueue, 0)
			}
		})
	}
	wg.Wait()
	return h
}

func runOp(t *testing.T, e *env, h *linmodel.History, client int, rng *rand.Rand, anyAdmission, anyQueue bool, force linmodel.Kind) {
	model := rng.IntN(linmodel.Models)
	if rng.IntN(30) == 0 {
		model = linmodel.Models // an unknown ID
	}
	id := linIDs[model]
	ctx := bg
	if rng.IntN(12) == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(bg, time.Duration(rng.IntN(4))*time.Millisecond)
		defer cancel()
	}
	in := linmodel.Input{Model: model}
	var out linmodel.Output
	var read *core.ModelStatus // the status a manager returned
	finish := func(err error) {
		out.Code = CodeOf(err)
		out.Unknown = out.Code == core.CodeCancelled
	}
	call := h.Now()
	p := rng.IntN(100)
	if force == linmodel.Apply {
		p = 50
	}
	switch {
	case p < 45:
		in.Kind = linmodel.Infer
		in.Fail = rng.IntN(10) == 0
		var o InferOptions
		switch rng.IntN(10) {
		case 0, 1, 2:
			o.Timeout = dur(time.Duration(1+rng.IntN(3)) * time.Millisecond)
		case 3:
			o.Timeout = dur(0)
		}
		in.Busy = (o.Timeout != nil && *o.Timeout > 0) || anyAdmission || anyQueue
		input := fmt.Sprintf(`{"fail":%v}`, in.Fail)
		if rng.IntN(3) == 0 {
			input = fmt.Sprintf(`{"fail":%v,"infer_ms":%d}`, in.Fail, rng.IntN(4))
		}
		res, err := e.rt.Infer(ctx, id, backends.Request{Input: json.RawMessage(input)}, o)
		finish(err)
		if err == nil {
			out.Version, out.Slot = res.Version, res.Slot
			fo := decodeOut(t, res.Output.JSON)
			if fo.Model != id || fo.ConfigVersion != res.Version || fo.Slot != res.Slot {
				t.Errorf("fixture output %s for result %+v", res.Output.JSON, res)
			}
		}
	case p < 65:
		in.Kind = linmodel.Apply
		in.Config = rng.IntN(len(h.Spec.Configs))
		in.Busy = anyAdmission
		if model == linmodel.Models {
			model, in.Model, id = 0, 0, linIDs[0]
		}
		st, err := e.rt.Apply(ctx, id, modelSpec(&h.Spec.Configs[in.Config]))
		finish(err)
		if err == nil {
			checkStatus(t, st)
			read = &st
		}
	case p < 70:
		in.Kind = linmodel.Load
		in.Busy = anyAdmission
		st, err := e.rt.Load(ctx, id)
		finish(err)
		if err == nil {
			checkStatus(t, st)
			read = &st
		}
	case p < 80:
		in.Kind = linmodel.Unload
		in.Busy = anyAdmission
		st, err := e.rt.Unload(ctx, id)
		finish(err)
		if err == nil {
			checkStatus(t, st)
			read = &st
		}
	case p < 88:
		members := linmodel.DrawBulk(rng)
		ids := make([]string, len(members))
		for k, i := range members {
			ids[k] = linIDs[i]
		}
		res, err := e.rt.BulkUnload(ctx, ids)
		ret := h.Now()
		code := CodeOf(err)
		var unloaded []int
		switch code {
		case core.CodeOK:
			for _, u := range res.Unloaded {
				unloaded = append(unloaded, linIndex(u))
			}
		case core.CodeCancelled:
		default:
			t.Errorf("bulk unload %v: %v", ids, err)
		}
		h.AddBulk(client, members, code, code == core.CodeCancelled, unloaded, call, ret)
		return
	default:
		in.Kind = linmodel.Status
		for _, st := range e.rt.Status() {
			checkStatus(t, st)
			out.Rows = append(out.Rows, linRow(st))
		}
	}
	ret := h.Now()
	h.Add(client, in, out, call, ret)
	if read != nil {
		h.AddRead(client, model, linRow(*read), call, ret)
	}
}

// checkStatus checks what one status row must satisfy on its own.
func checkStatus(t *testing.T, st core.ModelStatus) {
	t.Helper()
	bad := st.ActiveSlots > st.Slots || st.ActiveSlots < 0 ||
		(st.Loaded && (st.State != core.Ready && st.State != core.Reconfiguring || st.MaxParallelSlots < st.Slots)) ||
		(!st.Loaded && st.MaxParallelSlots != 0)
	if bad {
		t.Errorf("inconsistent status row %+v", st)
	}
}

// checkHistory runs porcupine on one history; for a failure it writes the
// visualization and returns a message naming the seed and the file.
func checkHistory(seed int64, h *linmodel.History) (porcupine.CheckResult, string) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("sluice-porcupine-%d.html", seed))
	res, err := h.Check(path)
	if res == porcupine.Ok {
		return res, ""
	}
	if err != nil {
		path = "(not written: " + err.Error() + ")"
	}
	return res, fmt.Sprintf("seed %d: history is %s (%d operations); visualization: %s\nconfigs:\n%s",
		seed, res, h.Len(), path, h.Spec.DescribeConfigs())
}
