package core

import (
	"errors"
	"math"
	"testing"
)

func memCfg(mb int64) *Config {
	c := cfg(1)
	c.MemoryMB = mb
	return c
}

// The memory budget never wraps (CONTRACT.md res.ledger-bounds): with a
// budget of 100 MB, estimates of 50, 2^63-8, 90 and 10^6 MB once all became
// ready because 50+(2^63-8) is negative and "fits". Now an estimate above
// MaxMemoryMB is refused as an invalid config, one at the cap finds no room
// (server_busy, nothing evicted), and 90 evicts 50.
func TestLedgerBoundsBudgetDoesNotWrap(t *testing.T) {
	h := newHarness(t, Options{MemoryBudgetMB: 100})
	h.register("a", memCfg(50), 1)
	huge := h.apply("b", memCfg(math.MaxInt64-7))
	h.expect(huge, "reject invalid_request")
	capped := h.apply("c", memCfg(MaxMemoryMB))
	h.completeAll(1)
	h.expect(capped, "reject server_busy")
	if st := h.state("a"); st.State != Ready {
		t.Fatalf("a refused load evicted a: %+v", st)
	}
	big := h.apply("d", memCfg(1_000_000))
	h.completeAll(1)
	h.expect(big, "reject server_busy")
	fit := h.apply("e", memCfg(90))
	h.completeAll(1)
	h.expect(fit, "done")
	if st := h.state("a"); st.State != Unloaded {
		t.Fatalf("a not evicted for e: %+v", st)
	}
	if h.m.resMB != 90 || h.m.resCount != 1 {
		t.Fatalf("ledger %d models/%dMB, want 1/90", h.m.resCount, h.m.resMB)
	}
}

// Without a budget the ledger still refuses a charge that would wrap it.
func TestLedgerBoundsRoomIsChecked(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.room(0, math.MaxInt64-5, 10) {
		t.Fatal("a charge past MaxInt64 fits")
	}
	if !m.room(0, math.MaxInt64-10, 10) {
		t.Fatal("a charge up to MaxInt64 does not fit")
	}
	m.opts.MemoryBudgetMB = 100
	if m.room(0, 50, math.MaxInt64-20) {
		t.Fatal("50 + 2^63-21 fits a budget of 100")
	}
}

// LedgerBounds catches a wrapped ledger that ResidencyLimit, summing with
// the same wrapping arithmetic, accepts.
func TestLedgerBoundsInvariantCatchesWrap(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", memCfg(50), 1)
	h.register("b", memCfg(50), 1)
	a, b := h.handle("a"), h.handle("b")
	h.m.models[a].resMB = math.MaxInt64
	h.m.models[b].resMB = 10
	h.m.resMB = math.MaxInt64
	h.m.resMB += 10 // wraps, as the old ledger did
	if err := checkResidencyLimit(h.m); err != nil {
		t.Fatalf("ResidencyLimit now catches it (the test's premise changed): %v", err)
	}
	err := h.m.CheckInvariants()
	var ie *InvariantError
	if !errors.As(err, &ie) || ie.Name != "LedgerBounds" {
		t.Fatalf("CheckInvariants = %v, want LedgerBounds", err)
	}
}

// Every size and duration of a Config and of Options is range-checked where
// it enters (CONTRACT.md fail.spec-bounds).
func TestLedgerBoundsValidation(t *testing.T) {
	bad := []func(c *Config){
		func(c *Config) { c.MemoryMB = MaxMemoryMB + 1 },
		func(c *Config) { c.MemoryMB = -1 },
		func(c *Config) { c.MaxQueue = MaxQueueLimit + 1 },
		func(c *Config) { c.AdmissionTimeout = MaxTimeout + 1 },
		func(c *Config) { c.Slots = MaxSlots + 1 },
		func(c *Config) { c.Slots = 0 },
		func(c *Config) { c.AdmissionTimeout = NoTimeout - 1 },
		func(c *Config) { c.MaxQueue = -1 },
		func(c *Config) { c.BaseVersion = MaxBaseVersion + 1 },
	}
	for k, f := range bad {
		c := cfg(1)
		f(c)
		if c.Validate() == nil {
			t.Errorf("config %d: %+v accepted", k, c)
		}
	}
	// Each bound itself is inside: exactly at every edge a config is valid.
	edge := []func(c *Config){
		func(c *Config) { c.Slots = MaxSlots },
		func(c *Config) { c.Slots = 1 },
		func(c *Config) { c.AdmissionTimeout = MaxTimeout },
		func(c *Config) { c.AdmissionTimeout = NoTimeout },
		func(c *Config) { c.AdmissionTimeout = 0 },
		func(c *Config) { c.MaxQueue = MaxQueueLimit },
		func(c *Config) { c.MaxQueue = 0 },
		func(c *Config) { c.MemoryMB = 0 },
		func(c *Config) { c.BaseVersion = MaxBaseVersion },
	}
	for k, f := range edge {
		c := cfg(1)
		f(c)
		if err := c.Validate(); err != nil {
			t.Errorf("edge config %d: %+v refused: %v", k, c, err)
		}
	}
	if c := memCfg(MaxMemoryMB); c.Validate() != nil {
		t.Errorf("memory at the cap refused: %v", c.Validate())
	}
	for k, o := range []Options{
		{MemoryBudgetMB: MaxMemoryMB + 1}, {MemoryBudgetMB: -1}, {MaxLoadedModels: MaxLoadedLimit + 1},
		{IdleTimeout: MaxTimeout + 1}, {DefaultAdmissionTimeout: MaxTimeout + 1}, {AdmissionCeiling: math.MaxInt64},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("options %d: %+v accepted", k, o)
		}
	}
	if _, err := New(Options{MemoryBudgetMB: MaxMemoryMB, MaxLoadedModels: MaxLoadedLimit, AdmissionCeiling: MaxTimeout}); err != nil {
		t.Errorf("options at the caps refused: %v", err)
	}
}

// A request override the caller did not bound saturates instead of wrapping
// into the past, where Tick would reject it at once.
func TestLedgerBoundsDeadlineSaturates(t *testing.T) {
	h := newHarness(t, Options{})
	h.register("a", cfg(1), 1)
	r1 := h.request("a")
	r2 := h.requestT("a", math.MaxInt64)
	if d := h.m.Deadline(r2); d != math.MaxInt64 {
		t.Fatalf("deadline %d, want saturated", d)
	}
	h.m.Tick(h.tick())
	h.collect()
	h.expect(r2, "pending")
	h.release(r1)
	h.expect(r2, "granted")
}

// TestLedgerBoundsAtTheCap: a pool charging exactly MaxMemoryMB, under a
// budget of exactly MaxMemoryMB, is resident and every invariant holds (the
// harness checks them after each event); the ledger bound is inclusive
// (CONTRACT.md res.ledger-bounds).
func TestLedgerBoundsAtTheCap(t *testing.T) {
	h := newHarness(t, Options{MemoryBudgetMB: MaxMemoryMB})
	h.register("a", memCfg(MaxMemoryMB), 1)
	if st := h.state("a"); st.State != Ready || h.m.resMB != MaxMemoryMB {
		t.Fatalf("%+v, ledger %d", st, h.m.resMB)
	}
}
