package core

import (
	"fmt"
	"strings"
	"testing"
)

// harness drives a Machine in tests: it records effects, remembers the
// pending backend jobs and checks the invariants after every event.
type harness struct {
	t    testing.TB
	m    *Machine
	now  int64
	log  []string
	jobs map[Job]Effect // started, not yet completed
	res  map[Ticket]Effect
	bulk map[Ticket]*BulkResult
	run  []Ticket // granted, not released, in grant order
	done bool     // ShutdownComplete seen
}

func newHarness(t testing.TB, opts Options) *harness {
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, m: m, jobs: map[Job]Effect{}, res: map[Ticket]Effect{}, bulk: map[Ticket]*BulkResult{}}
}

func cfg(slots int) *Config {
	return &Config{Task: "tts", Engine: "fixture", Checkpoint: "ck", Options: "{}", Slots: slots, MemoryMB: 100, AdmissionTimeout: NoTimeout}
}

func (h *harness) collect() []Effect {
	h.t.Helper()
	effs := append([]Effect(nil), h.m.Effects()...)
	for _, e := range effs {
		h.log = append(h.log, h.m.DescribeEffect(e))
		switch e.Kind {
		case EfStartLoad, EfStartClone, EfStartProbe, EfStartTeardown:
			h.jobs[e.Job] = e
		case EfShutdownComplete:
			h.done = true
		case EfGrant, EfReject, EfDone:
			h.res[e.Ticket] = e
			if e.Kind == EfGrant {
				h.run = append(h.run, e.Ticket)
			}
			if e.Bulk != nil {
				h.bulk[e.Ticket] = e.Bulk
			}
		}
	}
	if err := h.m.CheckInvariants(); err != nil {
		h.t.Fatalf("invariants after %v: %v\n%s", h.log, err, h.m.Describe())
	}
	h.m.Advance()
	return effs
}

func (h *harness) tick() int64 { h.now += 1000; return h.now }

func (h *harness) handle(id string) Handle {
	x, ok := h.m.Lookup(id)
	if !ok {
		h.t.Fatalf("no model %s", id)
	}
	return x
}

// register registers id with c and completes its whole load.
func (h *harness) register(id string, c *Config, capacity int) {
	h.t.Helper()
	tk := h.apply(id, c)
	h.completeAll(capacity)
	if e, ok := h.res[tk]; !ok || e.Kind != EfDone {
		h.t.Fatalf("register %s: %v", id, h.log)
	}
}

func (h *harness) apply(id string, c *Config) Ticket {
	tk := h.m.SubmitManager(h.tick(), id, OpApply, c, NoTimeout)
	h.collect()
	return tk
}

func (h *harness) manager(id string, op Op) Ticket {
	tk := h.m.SubmitManager(h.tick(), id, op, nil, NoTimeout)
	h.collect()
	return tk
}

func (h *harness) request(id string) Ticket {
	tk := h.m.SubmitRequest(h.tick(), h.handle(id), NoTimeout)
	h.collect()
	return tk
}

func (h *harness) requestT(id string, timeout int64) Ticket {
	if _, ok := h.m.Lookup(id); !ok { // unknown or unregistered: the shell's not_found path
		tk, _ := h.m.Step(Event{Kind: EvSubmitRequest, Now: h.tick(), Model: id, Timeout: timeout})
		h.collect()
		return tk
	}
	tk := h.m.SubmitRequest(h.tick(), h.handle(id), timeout)
	h.collect()
	return tk
}

func (h *harness) bulkUnload(ids ...string) Ticket {
	tk := h.m.SubmitBulkUnload(h.tick(), ids)
	h.collect()
	return tk
}

func (h *harness) release(tk Ticket) {
	h.t.Helper()
	for k, x := range h.run {
		if x == tk {
			h.run = append(h.run[:k], h.run[k+1:]...)
			break
		}
	}
	if err := h.m.Release(h.tick(), tk, false); err != nil {
		h.t.Fatal(err)
	}
	h.collect()
}

func (h *harness) cancel(tk Ticket, r Reason) bool {
	h.t.Helper()
	ok, err := h.m.Cancel(h.tick(), tk, r)
	if err != nil {
		h.t.Fatal(err)
	}
	h.collect()
	return ok
}

// pending returns the oldest pending job of kind k on model id.
func (h *harness) pending(id string, k EffectKind) (Effect, bool) {
	var best Effect
	found := false
	for _, e := range h.jobs {
		if e.Kind == k && (id == "" || h.m.ID(e.Model) == id) && (!found || e.Job < best.Job) {
			best, found = e, true
		}
	}
	return best, found
}

// complete finishes one pending job successfully (capacity for loads/probes).
func (h *harness) complete(e Effect, capacity int, failed bool) {
	h.t.Helper()
	delete(h.jobs, e.Job)
	var err error
	switch e.Kind {
	case EfStartLoad:
		err = h.m.LoadDone(h.tick(), e.Job, capacity, failed)
	case EfStartClone:
		err = h.m.CloneDone(h.tick(), e.Job, failed)
	case EfStartProbe:
		err = h.m.ProbeDone(h.tick(), e.Job, capacity, failed)
	case EfStartTeardown:
		err = h.m.TeardownDone(h.tick(), e.Job)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.collect()
}

// step completes the pending job of kind k on id.
func (h *harness) step(id string, k EffectKind, capacity int, failed bool) {
	h.t.Helper()
	e, ok := h.pending(id, k)
	if !ok {
		h.t.Fatalf("no pending %s on %s; log %v\n%s", k, id, h.log, h.m.Describe())
	}
	h.complete(e, capacity, failed)
}

// completeAll completes every pending job, oldest first, until none is left.
func (h *harness) completeAll(capacity int) {
	h.t.Helper()
	for len(h.jobs) > 0 {
		var first Effect
		found := false
		for _, e := range h.jobs {
			if !found || e.Job < first.Job {
				first, found = e, true
			}
		}
		h.complete(first, capacity, false)
	}
}

func (h *harness) outcome(tk Ticket) string {
	e, ok := h.res[tk]
	if !ok {
		return "pending"
	}
	switch e.Kind {
	case EfGrant:
		return fmt.Sprintf("granted v%d", e.Version)
	case EfReject:
		return "reject " + e.Code.String()
	}
	return "done"
}

func (h *harness) expect(tk Ticket, want string) {
	h.t.Helper()
	if got := h.outcome(tk); !strings.HasPrefix(got, want) {
		h.t.Fatalf("ticket outcome %q, want %q; log %v\n%s", got, want, h.log, h.m.Describe())
	}
}

func (h *harness) state(id string) ModelStatus { return h.m.Status(h.handle(id)) }

// drain completes every backend job (oldest first) and releases every
// granted request (oldest first) until nothing is pending.
func (h *harness) drain(capacity int) {
	h.t.Helper()
	for n := 0; ; n++ {
		if n > 10000 {
			h.t.Fatalf("drain does not converge: %v", h.log)
		}
		if len(h.jobs) > 0 {
			var first Effect
			found := false
			for _, e := range h.jobs {
				if !found || e.Job < first.Job {
					first, found = e, true
				}
			}
			h.complete(first, capacity, false)
			continue
		}
		if len(h.run) > 0 {
			h.release(h.run[0])
			continue
		}
		return
	}
}

func (h *harness) shutdown() {
	h.m.BeginShutdown(h.tick())
	h.collect()
}
