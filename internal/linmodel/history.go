package linmodel

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
)

// unknownReturn is the return time of an operation with an unknown outcome:
// after every other, so it may take effect at any time after its call.
const unknownReturn = 1 << 40

// History is one recorded history and its model.
type History struct {
	// Spec is the model the history is checked against.
	Spec Spec

	mu  sync.Mutex
	ops []porcupine.Operation
	clk atomic.Int64
}

// Now advances the history's logical clock and returns it: take it before
// a call and after its answer.
func (h *History) Now() int64 { return h.clk.Add(1) }

// Add records one operation of client between call and ret; one with an
// unknown outcome is open until the end of the history.
func (h *History) Add(client int, in Input, out Output, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if out.Unknown {
		ret = unknownReturn
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// AddRead records the status a manager on model returned: it was read when
// the manager finished, inside the manager's interval, possibly with the
// next operation on the model already begun in the same event, so it is
// checked as a one-model status read over the manager's interval.
func (h *History) AddRead(client, model int, row Row, call, ret int64) {
	h.Add(client, Input{Kind: StatusOne, Model: model}, Output{Rows: []Row{row}}, call, ret)
}

// AddBulk records a bulk unload of members (model indexes; a duplicate
// counts once) answered with code, as one BulkMember operation a member over
// the bulk's interval; unloaded are the members the answer named unloaded.
func (h *History) AddBulk(client int, members []int, code core.Code, unknown bool, unloaded []int, call, ret int64) {
	seen := map[int]bool{}
	for _, i := range members {
		if seen[i] {
			continue
		}
		seen[i] = true
		out := Output{Code: code, Unknown: unknown}
		for _, u := range unloaded {
			out.Found = out.Found || u == i
		}
		h.Add(client, Input{Kind: BulkMember, Model: i}, out, call, ret)
	}
}

// Operations is a copy of the operations recorded so far.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Len is the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Check runs porcupine on the history (at most a minute). For any result
// but porcupine.Ok it writes porcupine's HTML visualization to visPath; the
// error says why it could not be written.
func (h *History) Check(visPath string) (porcupine.CheckResult, error) {
	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	model := h.Spec.Model()
	res, info := porcupine.CheckOperationsVerbose(model, ops, time.Minute)
	if res == porcupine.Ok {
		return res, nil
	}
	if err := porcupine.VisualizePath(model, info, visPath); err != nil {
		return res, fmt.Errorf("linmodel: visualization: %w", err)
	}
	return res, nil
}
