package core

import (
	"fmt"
	"testing"
)

// Matrix "Operations crossed with model states": one subtest per cell. Each
// sets up model m in its state through events only, applies the operation,
// checks what must hold before earlier work drains, drains, and checks the
// response and the resulting state.

const capacity = 4

func changed(slots int, opt string) *Config {
	c := cfg(slots)
	c.Options = opt
	return c
}

// situation builds a start state and returns the harness; r0 is an earlier
// running request where the situation has one.
type situation struct {
	name  string
	opts  Options
	setup func(h *harness) (r0 Ticket)
}

var modelStates = []situation{
	{"unloaded", Options{}, func(h *harness) Ticket {
		h.register("m", cfg(2), capacity)
		h.manager("m", OpUnload)
		h.drain(capacity)
		return 0
	}},
	{"loading", Options{}, func(h *harness) Ticket {
		h.register("m", cfg(2), capacity)
		h.manager("m", OpUnload)
		h.drain(capacity)
		r := h.request("m") // starts the one cold load
		if _, ok := h.pending("m", EfStartLoad); !ok {
			h.t.Fatal("no load started")
		}
		return r
	}},
	{"ready", Options{}, func(h *harness) Ticket {
		h.register("m", cfg(2), capacity)
		return h.request("m")
	}},
	{"reconfiguring", Options{}, func(h *harness) Ticket {
		h.register("m", cfg(2), capacity)
		h.apply("m", changed(2, `{"v":1}`)) // probes before any teardown
		if _, ok := h.pending("m", EfStartProbe); !ok {
			h.t.Fatal("no probe started")
		}
		return 0
	}},
	{"unloading", Options{}, func(h *harness) Ticket {
		h.register("m", cfg(2), capacity)
		h.manager("m", OpUnload)
		if _, ok := h.pending("m", EfStartTeardown); !ok {
			h.t.Fatal("no teardown started")
		}
		return 0
	}},
}

func TestMatrixOpsInference(t *testing.T) {
	want := map[string]struct{ now, final string }{
		"unloaded":      {"pending", "granted v1"},
		"loading":       {"pending", "granted v1"},
		"ready":         {"granted v1", "granted v1"},
		"reconfiguring": {"pending", "granted v2"},
		"unloading":     {"pending", "granted v1"},
	}
	for _, s := range modelStates {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, s.opts)
			s.setup(h)
			r := h.request("m")
			h.expect(r, want[s.name].now)
			if s.name == "loading" && h.state("m").ActiveSlots != 2 {
				t.Fatalf("spare slot must admit and wait on initialization: %+v", h.state("m"))
			}
			h.drain(capacity)
			h.expect(r, want[s.name].final)
			if st := h.state("m").State; st != Ready {
				t.Fatalf("state %s, want ready", st)
			}
		})
	}
}

func TestMatrixOpsReconfigure(t *testing.T) {
	for _, s := range modelStates {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, s.opts)
			r0 := s.setup(h)
			v0 := h.state("m").ConfigVersion
			a := h.apply("m", changed(3, `{"v":2}`))
			if r0 != 0 || s.name == "reconfiguring" || s.name == "unloading" {
				h.expect(a, "pending") // barrier behind earlier work
			}
			if r0 != 0 && s.name == "ready" {
				// Earlier work drains first even with spare slots; no probe yet.
				if _, ok := h.pending("m", EfStartProbe); ok {
					t.Fatal("probe started while an earlier request runs")
				}
				r := h.request("m")
				h.expect(r, "pending") // later requests never overtake
			}
			h.drain(capacity)
			h.expect(a, "done")
			st := h.state("m")
			if st.State != Ready || st.Slots != 3 || st.ConfigVersion <= v0 || st.MaxParallelSlots != capacity {
				t.Fatalf("after reconfigure: %+v", st)
			}
		})
	}
}

func TestMatrixOpsUnload(t *testing.T) {
	for _, s := range modelStates {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, s.opts)
			r0 := s.setup(h)
			u := h.manager("m", OpUnload)
			switch s.name {
			case "unloaded":
				h.expect(u, "done") // idempotent
			case "loading":
				h.expect(u, "pending")
				if _, ok := h.pending("m", EfStartTeardown); ok {
					t.Fatal("teardown before the first load finished")
				}
			default:
				h.expect(u, "pending")
			}
			h.drain(capacity)
			h.expect(u, "done")
			if r0 != 0 {
				h.expect(r0, "granted") // earlier work ran first
			}
			if st := h.state("m"); st.State != Unloaded || st.Loaded || st.MaxParallelSlots != 0 {
				t.Fatalf("after unload: %+v", st)
			}
		})
	}
}

func TestMatrixOpsBulkUnload(t *testing.T) {
	for _, s := range modelStates {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, s.opts)
			s.setup(h)
			h.register("b", cfg(1), capacity) // a ready-idle second member
			b := h.bulkUnload("m", "b", "m", "ghost")
			if st := h.state("b"); st.Loaded {
				t.Fatalf("ready-idle member not freed at once: %+v", st)
			}
			h.drain(capacity)
			h.expect(b, "done")
			res := h.bulk[b]
			if fmt.Sprint(res.Unloaded) != "[m b]" || fmt.Sprint(res.NotFound) != "[ghost]" {
				t.Fatalf("bulk result %+v", res)
			}
			if st := h.state("m"); st.State != Unloaded {
				t.Fatalf("after bulk: %+v", st)
			}
		})
	}
}

// Eviction: with room for one resident model, a request to the unloaded
// model c needs m's residency. Only an idle, queue-free ready m is a victim;
// a retiring m is waited for, never picked twice; otherwise c gets 503.
func TestMatrixOpsEviction(t *testing.T) {
	want := map[string]struct{ c, m string }{
		"unloaded":      {"pending", "unloaded"}, // loads at once: no victim needed
		"loading":       {"reject server_busy", "loading"},
		"ready":         {"reject server_busy", "ready"}, // busy: r0 runs
		"ready-idle":    {"pending", "unloading"},
		"reconfiguring": {"reject server_busy", "reconfiguring"},
		"unloading":     {"pending", "unloading"},
	}
	cases := append([]situation(nil), modelStates...)
	cases = append(cases, situation{"ready-idle", Options{}, func(h *harness) Ticket {
		h.register("m", cfg(2), capacity)
		return 0
	}})
	for _, s := range cases {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, Options{MaxLoadedModels: 1})
			h.register("c", cfg(1), capacity)
			h.manager("c", OpUnload)
			h.drain(capacity)
			s.setup(h)
			teardowns := 0
			for _, e := range h.jobs {
				if e.Kind == EfStartTeardown {
					teardowns++
				}
			}
			r := h.request("c")
			h.expect(r, want[s.name].c)
			if got := h.state("m").State.String(); got != want[s.name].m {
				t.Fatalf("m is %s, want %s", got, want[s.name].m)
			}
			if s.name == "unloading" {
				for _, e := range h.jobs {
					if e.Kind == EfStartTeardown {
						teardowns--
					}
				}
				if teardowns != 0 {
					t.Fatal("a retiring model was picked again")
				}
			}
			h.drain(capacity)
			if want[s.name].c == "pending" {
				h.expect(r, "granted")
			}
			if s.name != "unloaded" {
				// m's own work continued undisturbed by the refused load.
				if st := h.state("m"); st.State == Loading || st.State == Reconfiguring {
					t.Fatalf("m stuck: %+v", st)
				}
			}
			if n, _ := h.m.Residency(); n > 1 {
				t.Fatalf("%d resident models, limit 1", n)
			}
		})
	}
}

func TestMatrixOpsStatus(t *testing.T) {
	want := map[string]struct {
		state  State
		loaded bool
		maxPar int
	}{
		"unloaded":      {Unloaded, false, 0},
		"loading":       {Loading, false, 0},
		"ready":         {Ready, true, capacity},
		"reconfiguring": {Reconfiguring, true, capacity}, // old pool serves metadata until retired
		"unloading":     {Unloading, false, 0},           // logical retirement before teardown ends
	}
	for _, s := range modelStates {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, s.opts)
			s.setup(h)
			before := h.m.Describe()
			st := h.state("m")
			w := want[s.name]
			if st.State != w.state || st.Loaded != w.loaded || st.MaxParallelSlots != w.maxPar || st.ConfigVersion != 1 {
				t.Fatalf("status %+v, want %+v", st, w)
			}
			_ = h.m.Snapshot()
			if h.m.Describe() != before || len(h.m.Effects()) != 0 {
				t.Fatal("status changed the machine")
			}
		})
	}
}

// Shutdown column: BeginShutdown with m in each state drains admitted work,
// tears every pool down and completes.
func TestMatrixOpsShutdown(t *testing.T) {
	for _, s := range modelStates {
		t.Run(s.name, func(t *testing.T) {
			h := newHarness(t, s.opts)
			r0 := s.setup(h)
			h.shutdown()
			if r0 != 0 && h.outcome(r0) == "reject shutting_down" {
				t.Fatal("admitted request rejected by shutdown")
			}
			h.drain(capacity)
			if !h.done {
				t.Fatalf("no ShutdownComplete: %s", h.m.Describe())
			}
			if n, mb := h.m.Residency(); n != 0 || mb != 0 {
				t.Fatalf("resident after shutdown: %d %d", n, mb)
			}
		})
	}
}

// Row "Shutting down": new work of every kind is refused; status still
// answers; a second BeginShutdown changes nothing.
func TestMatrixShuttingDownRow(t *testing.T) {
	h := newHarness(t, Options{IdleTimeout: 1})
	h.register("m", cfg(2), capacity)
	r0 := h.request("m")
	q := h.manager("m", OpUnload) // queued behind r0
	h.shutdown()
	h.expect(q, "reject shutting_down")
	h.expect(h.request("m"), "reject shutting_down")
	h.expect(h.apply("m", changed(2, `{"x":1}`)), "reject shutting_down")
	h.expect(h.apply("new", cfg(1)), "reject shutting_down")
	if _, ok := h.m.Lookup("new"); ok {
		t.Fatal("registration published during shutdown")
	}
	h.expect(h.manager("m", OpUnload), "reject shutting_down")
	h.expect(h.bulkUnload("m"), "reject shutting_down")
	h.m.Tick(h.tick() + 1e12) // idle retirement is off while shutting down
	h.collect()
	before := h.m.Describe()
	h.shutdown()
	if h.m.Describe() != before {
		t.Fatal("second BeginShutdown changed the machine")
	}
	if st := h.state("m"); st.ActiveSlots != 1 || !st.Loaded {
		t.Fatalf("status during shutdown: %+v", st)
	}
	h.release(r0)
	h.drain(capacity)
	if !h.done {
		t.Fatal("no ShutdownComplete")
	}
}
