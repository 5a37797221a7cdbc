package linmodel

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
)

// testConfigs is the config table of the hand-written histories.
var testConfigs = []Config{
	{Family: 0, Slots: 1, Capacity: 4, MemoryMB: 1},                  // 0
	{Family: 0, Slots: 2, Capacity: 4, MemoryMB: 1},                  // 1: reuses 0's live capacity
	{Family: 1, Slots: 2, Capacity: 4, MemoryMB: 2, FailProbe: true}, // 2: refused before the commit
	{Family: 2, Slots: 1, Capacity: 4, MemoryMB: 3, FailLoad: true},  // 3: fails after the commit
	{Family: 0, Slots: 17, Capacity: 4, MemoryMB: 1, Invalid: true},  // 4: refused by validation
	{Family: 0, Slots: 1, Capacity: 4, MemoryMB: 1, Admission: 2},    // 5: same sessions and slots as 0
	{Family: 1, Slots: 1, Capacity: 1, MemoryMB: 2},                  // 6
}

// op is one operation of a hand-written history.
type op struct {
	client    int
	in        Input
	out       Output
	call, ret int64
}

const a, b, z = 0, 1, Models

func apply(m, cfg int) Input  { return Input{Kind: Apply, Model: m, Config: cfg} }
func infer(m int) Input       { return Input{Kind: Infer, Model: m} }
func ok() Output              { return Output{} }
func code(c core.Code) Output { return Output{Code: c} }
func unknown() Output         { return Output{Unknown: true} }
func ran(version uint64, slot int) Output {
	return Output{Version: version, Slot: slot}
}
func rows(r ...Row) Output { return Output{Rows: r} }

func check(t *testing.T, sp Spec, ops []op) porcupine.CheckResult {
	t.Helper()
	h := &History{Spec: sp}
	for _, o := range ops {
		h.Add(o.client, o.in, o.out, o.call, o.ret)
	}
	res, _ := porcupine.CheckOperationsVerbose(h.Spec.Model(), h.Operations(), 0)
	return res
}

func TestHandWrittenHistories(t *testing.T) {
	reg := op{0, apply(a, 0), ok(), 1, 2} // register a with config 0: v1, loaded
	cases := []struct {
		name  string
		spec  Spec
		ops   []op
		legal bool
	}{
		{"an inference binds the committed version", Spec{}, []op{reg, {1, infer(a), ran(1, 0), 3, 4}}, true},
		{"an inference on a version never committed", Spec{}, []op{reg, {1, infer(a), ran(2, 0), 3, 4}}, false},
		{"an inference on a slot outside the pool", Spec{}, []op{reg, {1, infer(a), ran(1, 1), 3, 4}}, false},
		{"an inference on an unknown ID", Spec{}, []op{reg, {1, infer(z), code(core.CodeNotFound), 3, 4}}, true},
		{"an inference on an unknown ID that ran", Spec{}, []op{reg, {1, infer(z), ran(1, 0), 3, 4}}, false},
		{"an inference during a reconfigure sees the old version", Spec{}, []op{reg,
			{1, apply(a, 1), ok(), 3, 6}, {2, infer(a), ran(1, 0), 4, 5}}, true},
		{"an inference during a reconfigure sees the new pool", Spec{}, []op{reg,
			{1, apply(a, 1), ok(), 3, 6}, {2, infer(a), ran(2, 1), 4, 5}}, true},
		{"an inference after a reconfigure sees the old version (stale metadata)", Spec{}, []op{reg,
			{1, apply(a, 1), ok(), 3, 4}, {2, infer(a), ran(1, 0), 5, 6}}, false},
		{"same sessions and slots: a new version without a new pool", Spec{}, []op{reg,
			{1, apply(a, 5), ok(), 3, 4}, {2, infer(a), ran(2, 0), 5, 6}}, true},
		{"a failed probe keeps the committed version", Spec{}, []op{reg,
			{1, apply(a, 2), code(core.CodeBackend), 3, 4}, {2, infer(a), ran(1, 0), 5, 6}}, true},
		{"a failed probe commits nothing", Spec{}, []op{reg,
			{1, apply(a, 2), code(core.CodeBackend), 3, 4}, {2, Input{Kind: Status}, rows(Row{Model: a, Version: 2, Slots: 2}), 5, 6}}, false},
		{"a load failing after the commit leaves the new version unloaded", Spec{}, []op{
			{0, apply(a, 3), code(core.CodeBackend), 1, 2}, {1, Input{Kind: Status}, rows(Row{Model: a, Version: 1, Slots: 1}), 3, 4},
			{1, infer(a), code(core.CodeBackend), 5, 6}}, true},
		{"a model whose load fails cannot run", Spec{}, []op{
			{0, apply(a, 3), code(core.CodeBackend), 1, 2}, {1, infer(a), ran(1, 0), 3, 4}}, false},
		{"a config refused by validation registers nothing", Spec{}, []op{
			{0, apply(a, 4), code(core.CodeInvalid), 1, 2}, {1, infer(a), code(core.CodeNotFound), 3, 4}}, true},
		{"a reconfigure beyond the live capacity is invalid", Spec{}, []op{{0, apply(a, 6), ok(), 1, 2},
			{0, apply(a, 2), code(core.CodeInvalid), 3, 4}, {0, Input{Kind: Load, Model: a}, ok(), 5, 6}}, true},
		{"a reconfigure that reuses the live capacity probes nothing", Spec{}, []op{{0, apply(a, 6), ok(), 1, 2},
			{0, apply(a, 2), code(core.CodeBackend), 3, 4}}, false},

		// Unknown outcomes: any of the effects, or none, at any time after the call.
		{"an unknown reconfigure not taken yet", Spec{}, []op{reg,
			{1, apply(a, 1), unknown(), 3, 0}, {2, infer(a), ran(1, 0), 4, 5}, {2, infer(a), ran(2, 1), 6, 7}}, true},
		{"an unknown reconfigure cannot be undone", Spec{}, []op{reg,
			{1, apply(a, 1), unknown(), 3, 0}, {2, infer(a), ran(2, 1), 4, 5}, {2, infer(a), ran(1, 0), 6, 7}}, false},
		{"an unknown register may never happen", Spec{}, []op{{0, apply(a, 0), unknown(), 1, 0},
			{1, infer(a), code(core.CodeNotFound), 2, 3}, {1, Input{Kind: Status}, rows(), 4, 5}}, true},
		{"an unknown register is no registration before its call", Spec{}, []op{{1, infer(a), ran(1, 0), 1, 2},
			{0, apply(a, 0), unknown(), 3, 0}}, false},
		{"an unknown status says nothing", Spec{}, []op{reg, {1, Input{Kind: Status}, unknown(), 3, 4}}, true},

		// server_busy changes nothing and only ends a wait.
		{"server_busy on an unbounded wait", Spec{}, []op{reg, {1, infer(a), code(core.CodeServerBusy), 3, 4}}, false},
		{"server_busy on a bounded wait", Spec{}, []op{reg,
			{1, Input{Kind: Infer, Model: a, Busy: true}, code(core.CodeServerBusy), 3, 4}}, true},
		{"server_busy changes nothing", Spec{}, []op{reg,
			{1, Input{Kind: Apply, Model: a, Config: 1, Busy: true}, code(core.CodeServerBusy), 3, 4}, {1, infer(a), ran(2, 1), 5, 6}}, false},
		{"server_busy on a register without residency", Spec{}, []op{
			{0, Input{Kind: Apply, Model: a, Busy: true}, code(core.CodeServerBusy), 1, 2}}, false},
		{"server_busy on a register with unknown residency", Spec{BusyRegister: true}, []op{
			{0, Input{Kind: Apply, Model: a, Busy: true}, code(core.CodeServerBusy), 1, 2}}, true},
		{"server_busy on an unknown ID", Spec{BusyRegister: true}, []op{
			{0, Input{Kind: Infer, Model: z, Busy: true}, code(core.CodeServerBusy), 1, 2}}, false},

		// A failed load backs off (CONTRACT.md fail.load-backoff): an
		// inference that would load again may be refused until a manager
		// or a successful load ends the backoff.
		{"server_busy after a failed load, with a backoff", Spec{Backoff: true}, []op{
			{0, apply(a, 3), code(core.CodeBackend), 1, 2}, {1, infer(a), code(core.CodeServerBusy), 3, 4}}, true},
		{"server_busy after a failed load, without a backoff", Spec{}, []op{
			{0, apply(a, 3), code(core.CodeBackend), 1, 2}, {1, infer(a), code(core.CodeServerBusy), 3, 4}}, false},
		{"the backoff may have run out", Spec{Backoff: true}, []op{
			{0, apply(a, 3), code(core.CodeBackend), 1, 2}, {1, infer(a), code(core.CodeBackend), 3, 4}}, true},
		{"no backoff before any failure", Spec{Backoff: true}, []op{{0, apply(b, 0), ok(), 1, 2},
			{0, Input{Kind: Unload, Model: b}, ok(), 3, 4}, {1, infer(b), code(core.CodeServerBusy), 5, 6}}, false},
		{"a manager ends the backoff", Spec{Backoff: true}, []op{
			{0, apply(a, 3), code(core.CodeBackend), 1, 2}, {0, Input{Kind: Unload, Model: a}, ok(), 3, 4},
			{1, infer(a), code(core.CodeServerBusy), 5, 6}}, false},

		// Status: one atomic snapshot in registration order.
		{"status in registration order", Spec{}, []op{reg, {0, apply(b, 3), code(core.CodeBackend), 3, 4},
			{1, Input{Kind: Status}, rows(Row{Model: a, Version: 1, Slots: 1}, Row{Model: b, Version: 1, Slots: 1}), 5, 6}}, true},
		{"status out of registration order", Spec{}, []op{reg, {0, apply(b, 3), code(core.CodeBackend), 3, 4},
			{1, Input{Kind: Status}, rows(Row{Model: b, Version: 1, Slots: 1}, Row{Model: a, Version: 1, Slots: 1}), 5, 6}}, false},
		{"status missing a model", Spec{}, []op{reg, {0, apply(b, 0), ok(), 3, 4},
			{1, Input{Kind: Status}, rows(Row{Model: a, Version: 1, Slots: 1}), 5, 6}}, false},
		{"status mixing before and after", Spec{}, []op{reg, {0, apply(b, 0), ok(), 3, 4},
			{1, apply(a, 1), ok(), 5, 8}, {2, apply(b, 1), ok(), 5, 6},
			{3, Input{Kind: Status}, rows(Row{Model: a, Version: 2, Slots: 2}, Row{Model: b, Version: 1, Slots: 1}), 7, 9}}, false},
		{"status during one of two reconfigures", Spec{}, []op{reg, {0, apply(b, 0), ok(), 3, 4},
			{1, apply(a, 1), ok(), 5, 8}, {2, apply(b, 1), ok(), 5, 6},
			{3, Input{Kind: Status}, rows(Row{Model: a, Version: 1, Slots: 1}, Row{Model: b, Version: 2, Slots: 2}), 7, 9}}, true},
		{"status with memory when the target shows it", Spec{Memory: true}, []op{reg,
			{1, Input{Kind: Status}, rows(Row{Model: a, Version: 1, Slots: 1, MemoryMB: 1}), 3, 4}}, true},
		{"status with the wrong memory when the target shows it", Spec{Memory: true}, []op{reg,
			{1, Input{Kind: Status}, rows(Row{Model: a, Version: 1, Slots: 1, MemoryMB: 2}), 3, 4}}, false},
		{"status without memory when the target hides it", Spec{}, []op{reg,
			{1, Input{Kind: Status}, rows(Row{Model: a, Version: 1, Slots: 1}), 3, 4}}, true},
		{"the status a manager returned", Spec{}, []op{reg, {0, Input{Kind: StatusOne, Model: a}, rows(Row{Model: a, Version: 1, Slots: 1}), 1, 2}}, true},
		{"the status a manager returned, of another version", Spec{}, []op{reg,
			{0, Input{Kind: StatusOne, Model: a}, rows(Row{Model: a, Version: 2, Slots: 1}), 1, 2}}, false},

		// Bulk unload: a member each, within the bulk's interval.
		{"bulk members found and not found", Spec{}, []op{reg,
			{1, Input{Kind: BulkMember, Model: a}, Output{Found: true}, 3, 4}, {1, Input{Kind: BulkMember, Model: z}, ok(), 3, 4}}, true},
		{"bulk member found that was never registered", Spec{}, []op{reg,
			{1, Input{Kind: BulkMember, Model: z}, Output{Found: true}, 3, 4}}, false},
		{"bulk member not found that was registered", Spec{}, []op{reg,
			{1, Input{Kind: BulkMember, Model: a}, ok(), 3, 4}}, false},
		{"an unknown bulk member and an inference after it", Spec{}, []op{reg,
			{1, Input{Kind: BulkMember, Model: a}, unknown(), 3, 0}, {2, infer(a), ran(1, 0), 4, 5}}, true},
		{"unload then a cold load", Spec{}, []op{reg, {1, Input{Kind: Unload, Model: a}, ok(), 3, 4},
			{1, Input{Kind: Load, Model: a}, ok(), 5, 6}, {1, Input{Kind: Unload, Model: z}, code(core.CodeNotFound), 7, 8}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Configs = testConfigs
			want := porcupine.Illegal
			if c.legal {
				want = porcupine.Ok
			}
			if got := check(t, c.spec, c.ops); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}
