package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// Linearizability: many clients run random mixes of inference, register,
// reconfigure, load, unload, bulk unload and status on three models, with
// random fixture latencies and injected failures at every step, admission
// timeouts, full queues and clients that go away. Each history is checked
// by porcupine against the sequential model in linmodel_test.go; operations
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
					var h *linHistory
					synctest.Test(t, func(t *testing.T) { h = runHistory(t, seed, 0) })
					if t.Failed() {
						t.Logf("seed %d", seed)
						return
					}
					if res, msg := checkHistory(seed, h); res != porcupine.Ok {
						t.Error(msg)
					}
					done.Add(1)
					ops.Add(int64(len(h.ops)))
				}
			})
		}
	})
	t.Logf("%d histories, %d operations checked", done.Load(), ops.Load())
	if done.Load() != n && !t.Failed() {
		t.Fatalf("checked %d of %d histories", done.Load(), n)
	}
}

// linHistory is one recorded history.
type linHistory struct {
	spec linSpec
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

// genConfigs draws a history's config table: three families of options
// (equal options within a family, memory_mb naming the family) and six
// configs over them with slot counts, admission timeouts and queue limits.
func genConfigs(rng *rand.Rand) []linCfg {
	type family struct {
		capacity  int
		failLoad  bool
		failProbe bool
		failClone int
		opts      string
	}
	fams := make([]family, 3)
	for f := range fams {
		x := family{capacity: 3 + rng.IntN(2), failLoad: rng.IntN(10) == 0, failProbe: rng.IntN(7) == 0}
		if rng.IntN(4) == 0 {
			x.capacity = 1 + rng.IntN(2) // too small for some slot counts
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
			failClone: x.failClone, memoryMB: int64(f + 1), optionJSON: x.opts}
		if rng.IntN(5) == 0 {
			c.admission = 1 + rng.IntN(3)
		}
		if rng.IntN(10) == 0 {
			c.maxQueue = 1 + rng.IntN(2)
		}
		if rng.IntN(25) == 0 {
			c.invalid = true
		}
		cfgs[i] = c
	}
	return cfgs
}

func (c *linCfg) modelSpec() ModelSpec {
	s := ModelSpec{Engine: "fixture", Task: "tts", Checkpoint: "ck", Slots: c.slots, Options: json.RawMessage(c.optionJSON),
		AdmissionTimeout: time.Duration(c.admission) * time.Millisecond, AdmissionTimeoutSet: c.admission > 0, MaxQueue: c.maxQueue}
	if c.invalid {
		s.Slots = core.MaxSlots + 1
	}
	return s
}

// runHistory runs one workload inside a synctest bubble and records it.
// With mutants (planted core bugs) the core's invariants are not checked,
// so that only porcupine can notice.
func runHistory(t *testing.T, seed int64, mutants core.Mutants) *linHistory {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	h := &linHistory{spec: linSpec{cfgs: genConfigs(rng)}}
	anyAdmission, anyQueue := false, false
	for _, c := range h.spec.cfgs {
		anyAdmission = anyAdmission || c.admission > 0
		anyQueue = anyQueue || c.maxQueue > 0
	}
	var e *env
	if mutants != 0 {
		e = newEnv(t, core.Options{Mutants: mutants}, withoutChecks())
	} else {
		e = newEnv(t, core.Options{}, withTraceName(fmt.Sprintf("TestLinearizable-seed%d", seed)))
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
					runOp(t, e, h, c, crng, anyAdmission, anyQueue, opApply) // register early
					continue
				}
				runOp(t, e, h, c, crng, anyAdmission, anyQueue, 0)
			}
		})
	}
	wg.Wait()
	return h
}

func runOp(t *testing.T, e *env, h *linHistory, client int, rng *rand.Rand, anyAdmission, anyQueue bool, force opKind) {
	model := rng.IntN(linModels)
	if rng.IntN(30) == 0 {
		model = linModels // an unknown ID
	}
	id := "z"
	if model < linModels {
		id = linIDs[model]
	}
	ctx := bg
	if rng.IntN(12) == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(bg, time.Duration(rng.IntN(4))*time.Millisecond)
		defer cancel()
	}
	in := linInput{model: model}
	var out linOutput
	var read *core.ModelStatus // the status a manager returned
	finish := func(err error) {
		out.code = CodeOf(err)
		out.unknown = out.code == core.CodeCancelled
	}
	call := h.clk.Add(1)
	p := rng.IntN(100)
	if force == opApply {
		p = 50
	}
	switch {
	case p < 45:
		in.kind = opInfer
		in.fail = rng.IntN(10) == 0
		var o InferOptions
		switch rng.IntN(10) {
		case 0, 1, 2:
			o.Timeout = dur(time.Duration(1+rng.IntN(3)) * time.Millisecond)
		case 3:
			o.Timeout = dur(0)
		}
		in.busy = (o.Timeout != nil && *o.Timeout > 0) || anyAdmission || anyQueue
		input := fmt.Sprintf(`{"fail":%v}`, in.fail)
		if rng.IntN(3) == 0 {
			input = fmt.Sprintf(`{"fail":%v,"infer_ms":%d}`, in.fail, rng.IntN(4))
		}
		res, err := e.rt.Infer(ctx, id, backends.Request{Input: json.RawMessage(input)}, o)
		finish(err)
		if err == nil {
			out.version, out.slot = res.Version, res.Slot
			fo := decodeOut(t, res.Output.JSON)
			if fo.Model != id || fo.ConfigVersion != res.Version || fo.Slot != res.Slot {
				t.Errorf("fixture output %s for result %+v", res.Output.JSON, res)
			}
		}
	case p < 65:
		in.kind = opApply
		in.cfg = rng.IntN(len(h.spec.cfgs))
		in.busy = anyAdmission
		if model == linModels {
			model, in.model, id = 0, 0, linIDs[0]
		}
		st, err := e.rt.Apply(ctx, id, h.spec.cfgs[in.cfg].modelSpec())
		finish(err)
		if err == nil {
			checkStatus(t, st)
			read = &st
		}
	case p < 70:
		in.kind = opLoad
		in.busy = anyAdmission
		st, err := e.rt.Load(ctx, id)
		finish(err)
		if err == nil {
			checkStatus(t, st)
			read = &st
		}
	case p < 80:
		in.kind = opUnload
		in.busy = anyAdmission
		st, err := e.rt.Unload(ctx, id)
		finish(err)
		if err == nil {
			checkStatus(t, st)
			read = &st
		}
	case p < 88:
		var ids []string
		for i := range linModels + 1 {
			if rng.IntN(2) == 0 {
				if i < linModels {
					ids = append(ids, linIDs[i])
				} else {
					ids = append(ids, "z")
				}
			}
		}
		if len(ids) > 1 && rng.IntN(3) == 0 {
			ids = append(ids, ids[0]) // a duplicate counts once
		}
		res, err := e.rt.BulkUnload(ctx, ids)
		ret := h.clk.Add(1)
		code := CodeOf(err)
		seen := map[string]bool{}
		for _, x := range ids {
			if seen[x] {
				continue
			}
			seen[x] = true
			mi := linModels
			for k, y := range linIDs {
				if y == x {
					mi = k
				}
			}
			mo := linOutput{code: code, unknown: code == core.CodeCancelled}
			if code == core.CodeOK {
				for _, u := range res.Unloaded {
					mo.found = mo.found || u == x
				}
			} else if !mo.unknown {
				t.Errorf("bulk unload %v: %v", ids, err)
			}
			h.add(client, linInput{kind: opBulkMember, model: mi}, mo, call, ret)
		}
		return
	default:
		in.kind = opStatus
		all := e.rt.Status()
		for _, st := range all {
			checkStatus(t, st)
			out.status = append(out.status, linStatus{id: st.ID, version: st.ConfigVersion, slots: st.Slots, mem: st.MemoryMB})
		}
	}
	ret := h.clk.Add(1)
	h.add(client, in, out, call, ret)
	h.statusRead(client, model, read, call, ret)
}

// statusRead records the status a manager returned: it was read when the
// manager finished, inside the manager's interval, possibly with the next
// operation on the model already begun in the same event. It is checked as
// a one-model status read over the manager's interval.
func (h *linHistory) statusRead(client, model int, st *core.ModelStatus, call, ret int64) {
	if st == nil {
		return
	}
	in := linInput{kind: opStatusOne, model: model}
	out := linOutput{status: []linStatus{{id: st.ID, version: st.ConfigVersion, slots: st.Slots, mem: st.MemoryMB}}}
	h.add(client, in, out, call, ret)
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
func checkHistory(seed int64, h *linHistory) (porcupine.CheckResult, string) {
	model := h.spec.model()
	res, info := porcupine.CheckOperationsVerbose(model, h.ops, time.Minute)
	if res == porcupine.Ok {
		return res, ""
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("sluice-porcupine-%d.html", seed))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		path = "(not written: " + err.Error() + ")"
	}
	var cfgs strings.Builder
	for i, c := range h.spec.cfgs {
		fmt.Fprintf(&cfgs, "  cfg%d: family %d slots %d admission %dms max_queue %d invalid %v %s\n",
			i, c.family, c.slots, c.admission, c.maxQueue, c.invalid, c.optionJSON)
	}
	return res, fmt.Sprintf("seed %d: history is %s (%d operations); visualization: %s\nconfigs:\n%s",
		seed, res, len(h.ops), path, cfgs.String())
}

// The check has teeth: with a planted core bug that binds requests to the
// old config version after a reconfigure (core.MutStaleMetadata), and the
// core's own invariant checks off, porcupine finds a history that is not
// linearizable.
func TestLinearizableCatchesStaleMetadata(t *testing.T) {
	for seed := int64(1); seed <= 2000; seed++ {
		var h *linHistory
		synctest.Test(t, func(t *testing.T) { h = runHistory(t, seed, core.MutStaleMetadata) })
		if res, msg := checkHistory(seed, h); res == porcupine.Illegal {
			t.Logf("caught after %d histories: %s", seed, strings.SplitN(msg, "\n", 2)[0])
			return
		}
	}
	t.Fatal("porcupine did not notice stale metadata in 2000 histories")
}
