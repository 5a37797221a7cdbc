package abstract

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
)

var testConfigs = NewConfigTable()

var c2 = testConfigs.Intern(Config{Task: "tts", Engine: "fx", Checkpoint: "ck", Options: "{}", Slots: 2, MemoryMB: 100})

// one applies a and requires exactly one outcome.
func one(t *testing.T, s *State, p *Params, a Action) (*State, []Effect) {
	t.Helper()
	outs, err := Step(s, a, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 {
		t.Fatalf("%s: %d outcomes", a.Kind, len(outs))
	}
	if err := CheckInvariants(outs[0].State, p); err != nil {
		t.Fatal(err)
	}
	return outs[0].State, outs[0].Effects
}

func effects(effs []Effect) string {
	var parts []string
	for _, e := range effs {
		parts = append(parts, e.Kind.String())
	}
	return strings.Join(parts, ",")
}

// ready registers model a with c2 and loads it completely.
func ready(t *testing.T, p *Params) *State {
	s := &State{}
	s, _ = one(t, s, p, Action{Kind: core.EvSubmitManager, Model: "a", Op: core.OpApply, Cfg: c2, Timeout: core.NoTimeout})
	s, _ = one(t, s, p, Action{Kind: core.EvLoadDone, Model: "a", Capacity: 4})
	s, fx := one(t, s, p, Action{Kind: core.EvCloneDone, Model: "a"})
	if s.Models[0].Life != core.Ready || effects(fx) != "Done" {
		t.Fatalf("not ready: %+v %s", s.Models[0], effects(fx))
	}
	return s
}

// TestManagerIsABarrier (CONTRACT order.request-then-manager): a
// later request does not take a spare slot past a waiting manager.
func TestManagerIsABarrier(t *testing.T) {
	p := &Params{}
	s := ready(t, p)
	s, fx := one(t, s, p, Action{Kind: core.EvSubmitRequest, Model: "a", Ticket: 10, Timeout: core.NoTimeout})
	if effects(fx) != "Grant" {
		t.Fatal(effects(fx))
	}
	s, _ = one(t, s, p, Action{Kind: core.EvSubmitManager, Model: "a", Op: core.OpUnload, Ticket: 11, Timeout: core.NoTimeout})
	s, fx = one(t, s, p, Action{Kind: core.EvSubmitRequest, Model: "a", Ticket: 12, Timeout: core.NoTimeout})
	if len(fx) != 0 || len(s.Models[0].Queue) != 2 {
		t.Fatalf("request passed the barrier: %s", effects(fx))
	}
	s, fx = one(t, s, p, Action{Kind: core.EvRelease, Ticket: 10})
	if effects(fx) != "StartTeardown" || s.Models[0].Life != core.Unloading || s.Models[0].Published {
		t.Fatalf("unload did not start: %s %+v", effects(fx), s.Models[0])
	}
	s, fx = one(t, s, p, Action{Kind: core.EvTeardownDone, Model: "a"})
	if (effects(fx) != "Done,StartLoad" && effects(fx) != "StartLoad,Done") || s.Models[0].Job != JLoad ||
		len(s.Models[0].Holders) != 1 || !s.Models[0].Holders[0].Wait {
		t.Fatalf("after unload: %s %+v", effects(fx), s.Models[0])
	}
}

// TestProbeFailureKeepsOld (CONTRACT fail.capacity-probe): a failed probe keeps the old pool, config and version.
func TestProbeFailureKeepsOld(t *testing.T) {
	p := &Params{}
	s := ready(t, p)
	c := testConfigs.Intern(Config{Task: "tts", Engine: "fx", Checkpoint: "ck", Options: `{"v":2}`, Slots: 2, MemoryMB: 100})
	s, fx := one(t, s, p, Action{Kind: core.EvSubmitManager, Model: "a", Op: core.OpApply, Cfg: c, Ticket: 5, Timeout: core.NoTimeout})
	if effects(fx) != "StartProbe" || !s.Models[0].Published {
		t.Fatalf("%s %+v", effects(fx), s.Models[0])
	}
	s, fx = one(t, s, p, Action{Kind: core.EvProbeDone, Model: "a", Capacity: 1})
	md := s.Models[0]
	if effects(fx) != "Reject" || fx[0].Code != core.CodeInvalid || md.Cfg != c2 || md.Ver != 1 || !md.Published || md.Life != core.Ready {
		t.Fatalf("%s %+v", effects(fx), md)
	}
}

// TestEvictionLRU (CONTRACT res.victim-choice): with room for two resident
// models, both idle, the third model's registration load evicts the least
// recently used one, and only it.
func TestEvictionLRU(t *testing.T) {
	p := &Params{MaxLoaded: 2}
	s := ready(t, p) // a published first
	s, _ = one(t, s, p, Action{Kind: core.EvSubmitManager, Model: "b", Op: core.OpApply, Cfg: c2, Ticket: 20, Timeout: core.NoTimeout})
	s, _ = one(t, s, p, Action{Kind: core.EvLoadDone, Model: "b", Capacity: 4})
	s, _ = one(t, s, p, Action{Kind: core.EvCloneDone, Model: "b"})
	victim := func(s *State) string {
		s, fx := one(t, s, p, Action{Kind: core.EvSubmitManager, Model: "c", Op: core.OpApply, Cfg: c2, Ticket: 30, Timeout: core.NoTimeout})
		for _, e := range fx {
			if e.Kind == core.EfStartTeardown && e.Cause == core.CauseEvict {
				return s.Models[e.Model].ID
			}
		}
		return "none"
	}
	if v := victim(s); v != "a" {
		t.Fatalf("victim %s, want a (least recently used)", v)
	}
	// A lease of a ends: now b is the least recently used.
	s, _ = one(t, s, p, Action{Kind: core.EvSubmitRequest, Model: "a", Ticket: 40, Timeout: core.NoTimeout})
	s, _ = one(t, s, p, Action{Kind: core.EvRelease, Ticket: 40})
	if v := victim(s); v != "b" {
		t.Fatalf("victim %s, want b", v)
	}
}

// TestInvariantsFire: a state with a request granted past a queued manager
// breaks NoBarging.
func TestInvariantsFire(t *testing.T) {
	p := &Params{}
	s := ready(t, p)
	md := &s.Models[0]
	md.Queue = []Entry{{ID: 2, Kind: KMgr, Op: core.OpUnload, Seq: 5}}
	md.Holders = []Holder{{ID: 3, Ver: 1, Seq: 6}}
	err := CheckInvariants(s, p)
	if err == nil || !strings.Contains(err.Error(), "NoBarging") {
		t.Fatalf("%v", err)
	}
}

// TestUnregister (TLA+ Tombstone; CONTRACT unreg.barrier, unreg.404-after,
// unreg.re-register): the unregister waits for the running request, the
// request behind it gets not_found, the entry keeps its version as a
// tombstone, and a registration of the ID starts past it.
func TestUnregister(t *testing.T) {
	p := &Params{}
	s := ready(t, p)
	s, _ = one(t, s, p, Action{Kind: core.EvSubmitRequest, Model: "a", Ticket: 10, Timeout: core.NoTimeout})
	s, fx := one(t, s, p, Action{Kind: core.EvSubmitManager, Model: "a", Op: core.OpUnregister, Ticket: 11, Timeout: core.NoTimeout})
	if len(fx) != 0 {
		t.Fatalf("the unregister did not wait: %s", effects(fx))
	}
	s, _ = one(t, s, p, Action{Kind: core.EvSubmitRequest, Model: "a", Ticket: 12, Timeout: core.NoTimeout})
	s, fx = one(t, s, p, Action{Kind: core.EvRelease, Ticket: 10})
	if effects(fx) != "StartTeardown" || s.Models[0].Step != SUnregister {
		t.Fatalf("release: %s %+v", effects(fx), s.Models[0])
	}
	s, fx = one(t, s, p, Action{Kind: core.EvTeardownDone, Model: "a"})
	if effects(fx) != "Done,Reject" || fx[1].Ticket != 12 || fx[1].Code != core.CodeNotFound {
		t.Fatalf("teardown: %+v", fx)
	}
	if md := s.Models[0]; !md.Gone || md.Ver != 1 || s.Lookup("a") >= 0 || s.Entry("a") != 0 {
		t.Fatalf("tombstone: %+v", md)
	}
	s, fx = one(t, s, p, Action{Kind: core.EvSubmitRequest, Model: "a", Ticket: 13, Timeout: core.NoTimeout})
	if effects(fx) != "Reject" || fx[0].Code != core.CodeNotFound {
		t.Fatalf("request after: %+v", fx)
	}
	s, _ = one(t, s, p, Action{Kind: core.EvSubmitManager, Model: "a", Op: core.OpApply, Cfg: c2, Ticket: 14, Timeout: core.NoTimeout})
	if md := s.Models[0]; md.Gone || md.Ver != 2 || len(s.Models) != 1 {
		t.Fatalf("re-registration: %+v", s.Models)
	}
	// Breaking the tombstone breaks TombstoneEmpty.
	s.Models[0].Gone, s.Models[0].Resident = true, true
	if err := TombstoneEmpty(s, p); err == nil {
		t.Fatal("TombstoneEmpty passed a tombstone that holds a pool")
	}
}

// TestParseNames: every step and job name parses back to itself.
func TestParseNames(t *testing.T) {
	for k, n := range stepNames {
		if s, ok := ParseStep(n); !ok || s != MStep(k) || s.String() != n {
			t.Fatalf("ParseStep(%q) = %v, %v", n, s, ok)
		}
	}
	for k, n := range jobNames {
		if j, ok := ParseJob(n); !ok || j != Job(k) || j.String() != n {
			t.Fatalf("ParseJob(%q) = %v, %v", n, j, ok)
		}
	}
	if _, ok := ParseStep("x"); ok {
		t.Fatal("ParseStep accepted x")
	}
	if _, ok := ParseJob("x"); ok {
		t.Fatal("ParseJob accepted x")
	}
}
