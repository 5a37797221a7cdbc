package conformance

import (
	"fmt"
	"testing"
)

// TestAnsweredSlotAwaited catches a race in a case rather than in a server:
// a request's slot is given back only once its answer has been written
// (phase.executing), so a client holds the answer a moment before the slot
// is free. Two kinds of step depend on that slot being free, and a case
// that sends one straight after such an answer fails now and then:
//   - under a residency limit, a request to another model: it may find the
//     answered model still busy, the only victim, and be refused
//     (fail.residency-refusal), as the contract asks;
//   - a request to the same model whose answer must name a slot: it may be
//     given another free slot.
//
// Such a case must first wait for the answered model's active_slots.
func TestAnsweredSlotAwaited(t *testing.T) {
	for _, c := range loadSuite(t).Cases {
		residency := c.Server != nil && (c.Server.MaxLoadedModels > 0 || c.Server.MemoryBudgetMB > 0)
		if err := answeredSlotAwaited(c.Steps, residency); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}

// answeredSlotAwaited reports the first step that depends on the slot of an
// answered inference being free before the case has waited for it.
func answeredSlotAwaited(steps []Step, residency bool) error {
	inferOn := map[string]string{} // async inference call -> its model
	namesSlot := map[string]bool{} // async call whose answer must name a slot
	for _, s := range steps {
		if a, ok := s.Arg.(*AwaitStep); ok && a.Body["slot"] != nil {
			namesSlot[a.Call] = true
		}
	}
	busy := map[string]string{} // model answered, not yet awaited idle -> the call
	for _, s := range steps {
		switch a := s.Arg.(type) {
		case *AwaitStep:
			if m, ok := inferOn[a.Call]; ok && !a.Disconnected && (a.Status == 0 || a.Status == 200) {
				busy[m] = a.Call
			}
			continue
		case *ModelExpect:
			// Awaiting its active slots, or its teardown, waits for the slot.
			st := (*a)["state"]
			if m, ok := (*a)["model"].(string); ok && s.Kind == "await_model" &&
				((*a)["active_slots"] != nil || st == "unloaded" || st == "unloading") {
				delete(busy, m)
			}
			continue
		case *string:
			// An absent model holds no slot: its unregister was granted
			// only after every earlier lease ended (unreg.barrier).
			if s.Kind == "absent" {
				delete(busy, *a)
			}
			continue
		case *TargetStep:
			if s.Kind == "unload" { // a manager on the model waits behind its slot
				delete(busy, a.Model)
			}
		case *BulkStep:
			for _, m := range a.Models {
				delete(busy, m)
			}
		}
		to := requestModel(s)
		if to == "" {
			continue
		}
		if in, ok := s.Arg.(*InferStep); ok {
			slot := namesSlot[in.As] || (in.Expect != nil && in.Expect.Body["slot"] != nil)
			if call, ok := busy[to]; ok && slot {
				return fmt.Errorf("%s:%d: a slot expected on %s after %s's answer: await_model {model: %s, active_slots: ...} first",
					s.File, s.Line, to, call, to)
			}
		}
		if residency {
			for m, call := range busy {
				if m != to {
					return fmt.Errorf("%s:%d: a request to %s after %s's answer on %s: await_model {model: %s, active_slots: 0} first",
						s.File, s.Line, to, call, m, m)
				}
			}
		}
		// Steps after a request to the answered model itself wait behind
		// its slot or see it taken again: the race is over.
		delete(busy, to)
		if in, ok := s.Arg.(*InferStep); ok && in.As != "" {
			inferOn[in.As] = in.Model
		}
	}
	return nil
}

// requestModel is the model a step sends a request to that may need a slot
// or room in the residency limits ("" for other steps: an unload queues
// behind the model's earlier work and needs no room).
func requestModel(s Step) string {
	switch a := s.Arg.(type) {
	case *InferStep:
		return a.Model
	case *PutStep:
		return a.Model
	case *TargetStep:
		if s.Kind == "load" {
			return a.Model
		}
	}
	return ""
}

// TestAnsweredSlotAwaitedCatches shows the rule above finds the patterns it
// is for and passes their fixes.
func TestAnsweredSlotAwaitedCatches(t *testing.T) {
	x1 := Step{Kind: "infer", Arg: &InferStep{Model: "X", Call: Call{As: "x1"}}}
	answered := Step{Kind: "await", Arg: &AwaitStep{Call: "x1"}}
	idle := Step{Kind: "await_model", Arg: &ModelExpect{"model": "X", "active_slots": 0}}
	toK := Step{Kind: "infer", Arg: &InferStep{Model: "K"}}
	slotOnX := Step{Kind: "infer", Arg: &InferStep{Model: "X", Call: Call{Expect: &Expect{Body: map[string]any{"slot": 0}}}}}
	for _, tc := range []struct {
		name      string
		steps     []Step
		residency bool
		racy      bool
	}{
		{"other model under a residency limit", []Step{x1, answered, toK}, true, true},
		{"the same, after waiting", []Step{x1, answered, idle, toK}, true, false},
		{"other model, no residency limit", []Step{x1, answered, toK}, false, false},
		{"an unload, which needs no room", []Step{x1, answered, {Kind: "unload", Arg: &TargetStep{Model: "K"}}}, true, false},
		{"a slot on the same model", []Step{x1, answered, slotOnX}, false, true},
		{"a slot on the same model, after waiting", []Step{x1, answered, idle, slotOnX}, false, false},
		{"a slot on the same model, checked later", []Step{x1, answered,
			{Kind: "infer", Arg: &InferStep{Model: "X", Call: Call{As: "w1"}}},
			{Kind: "await", Arg: &AwaitStep{Call: "w1", Expect: Expect{Body: map[string]any{"slot": 0}}}}}, false, true},
		{"an unload of the answered model first", []Step{x1, answered, {Kind: "unload", Arg: &TargetStep{Model: "X"}}, toK}, true, false},
		{"no slot on the same model", []Step{x1, answered, {Kind: "infer", Arg: &InferStep{Model: "X"}}}, true, false},
		{"the answered model unregistered first", []Step{x1, answered, {Kind: "absent", Arg: ptr("X")}, toK}, true, false},
		{"another model unregistered", []Step{x1, answered, {Kind: "absent", Arg: ptr("K")}, toK}, true, true},
	} {
		if err := answeredSlotAwaited(tc.steps, tc.residency); (err != nil) != tc.racy {
			t.Errorf("%s: racy %v, got %v", tc.name, tc.racy, err)
		}
	}
}

func ptr(s string) *string { return &s }
