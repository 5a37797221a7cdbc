package wire

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The model object: aliases always a list, max_parallel_slots null until
// a pool is published (CONTRACT.md mode.slot-capacity), backing_off from
// the core's backoff.
func TestModelOf(t *testing.T) {
	m := ModelOf(core.ModelStatus{ID: "a", Slots: 2})
	if m.Object != "model" || m.OwnedBy != OwnedBy || m.Aliases == nil || m.MaxParallelSlots != nil || m.BackingOff {
		t.Fatalf("unloaded: %+v", m)
	}
	m = ModelOf(core.ModelStatus{ID: "a", Loaded: true, MaxParallelSlots: 4, Aliases: "b,c", BackoffUntil: 1})
	if m.MaxParallelSlots == nil || *m.MaxParallelSlots != 4 || len(m.Aliases) != 2 || !m.BackingOff {
		t.Fatalf("loaded: %+v", m)
	}
	if e := AliasEntry(m, "b"); e.ID != "b" || e.AliasOf != "a" || len(e.Aliases) != 0 {
		t.Fatalf("alias entry: %+v", e)
	}
}

// A registration's second is kept across reconfigures and forgotten with
// the model.
func TestCreated(t *testing.T) {
	var c Created
	c.Note("a", time.Unix(100, 0))
	c.Note("a", time.Unix(200, 0))
	if got := c.Of("a"); got != 100 {
		t.Fatalf("created %d, want the first registration's 100", got)
	}
	c.Forget("a")
	c.Note("a", time.Unix(300, 0))
	if got := c.Of("a"); got != 300 {
		t.Fatalf("created %d after a new registration, want 300", got)
	}
	if c.Of("never") == 0 {
		t.Fatal("an ID noted nowhere has no created")
	}
}

// An inference body needs input, and its admission timeout is bounded
// (CONTRACT.md fail.spec-bounds).
func TestParseInfer(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		req InferRequest
		ok  bool
	}{
		{InferRequest{}, false},
		{InferRequest{Input: json.RawMessage(`1`)}, true},
		{InferRequest{Input: json.RawMessage(`1`), AdmissionTimeoutMS: ms(0)}, true},
		{InferRequest{Input: json.RawMessage(`1`), AdmissionTimeoutMS: ms(runtime.MaxTimeoutMS)}, true},
		{InferRequest{Input: json.RawMessage(`1`), AdmissionTimeoutMS: ms(runtime.MaxTimeoutMS + 1)}, false},
		{InferRequest{Input: json.RawMessage(`1`), AdmissionTimeoutMS: ms(-1)}, false},
	} {
		if err := ParseInfer(&c.req); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok=%v", c.req, err, c.ok)
		}
	}
}
