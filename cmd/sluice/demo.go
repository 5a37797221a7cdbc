package main

import (
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/core"
)

// demo drives the pure scheduler through a scripted scenario: a cold load
// shared by two requests, a full pool with a queue, an unload barrier that
// later requests cannot pass, and a reconfigure refused before any teardown.
// Backend steps complete at once; every effect and the status are printed.
func demo(w io.Writer) error {
	m, err := core.New(core.Options{MaxLoadedModels: 2})
	if err != nil {
		return err
	}
	now := int64(0)
	var jobs []core.Effect
	flush := func(what string) error {
		now += 1e6
		fmt.Fprintf(w, "# %s\n", what)
		for _, e := range m.Effects() {
			fmt.Fprintf(w, "  -> %s\n", m.DescribeEffect(e))
			switch e.Kind {
			case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown:
				jobs = append(jobs, e)
			}
		}
		m.Advance()
		if err := m.CheckInvariants(); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		return nil
	}
	drain := func() error {
		for len(jobs) > 0 {
			e := jobs[0]
			jobs = jobs[1:]
			var err error
			switch e.Kind {
			case core.EfStartLoad:
				err = m.LoadDone(now, e.Job, 4, false)
			case core.EfStartClone:
				err = m.CloneDone(now, e.Job, false)
			case core.EfStartProbe:
				err = m.ProbeDone(now, e.Job, 4, false)
			case core.EfStartTeardown:
				err = m.TeardownDone(now, e.Job)
			}
			if err != nil {
				return err
			}
			if err := flush(e.Kind.String() + " finished"); err != nil {
				return err
			}
		}
		return nil
	}
	tts := &core.Config{Task: "tts", Engine: "fixture", Checkpoint: "voice", Options: "{}", Slots: 2, MemoryMB: 300}
	m.SubmitManager(now, "tts", core.OpApply, tts, core.NoTimeout)
	if err := flush("register tts with 2 slots"); err != nil {
		return err
	}
	if err := drain(); err != nil {
		return err
	}
	h, _ := m.Lookup("tts")
	r1 := m.SubmitRequest(now, h, core.NoTimeout)
	r2 := m.SubmitRequest(now, h, core.NoTimeout)
	r3 := m.SubmitRequest(now, h, core.NoTimeout)
	if err := flush("three requests: two slots, one queued"); err != nil {
		return err
	}
	m.SubmitManager(now, "tts", core.OpUnload, nil, core.NoTimeout)
	r4 := m.SubmitRequest(now, h, core.NoTimeout)
	if err := flush("unload barrier, then a fourth request that must not pass it"); err != nil {
		return err
	}
	for _, r := range []core.Ticket{r1, r2} {
		if err := m.Release(now, r, false); err != nil {
			return err
		}
	}
	if err := flush("two releases: the queued request runs, the barrier still waits"); err != nil {
		return err
	}
	if err := m.Release(now, r3, false); err != nil {
		return err
	}
	if err := flush("last release: the barrier runs"); err != nil {
		return err
	}
	if err := drain(); err != nil {
		return err
	}
	if err := m.Release(now, r4, false); err != nil {
		return err
	}
	if err := flush("fourth request done"); err != nil {
		return err
	}
	bad := *tts
	bad.Slots = 5
	bad.Options = `{"voice":"b"}`
	m.SubmitManager(now, "tts", core.OpApply, &bad, core.NoTimeout)
	if err := flush("reconfigure to 5 slots on capacity 4: probed before any teardown"); err != nil {
		return err
	}
	if err := drain(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%-6s %-10s %-6s %-5s %-6s %-6s %-8s %s\n", "MODEL", "STATE", "LOADED", "SLOTS", "ACTIVE", "QUEUED", "MAX_PAR", "VERSION")
	for _, s := range m.Snapshot() {
		fmt.Fprintf(w, "%-6s %-10s %-6v %-5d %-6d %-6d %-8d %d\n", s.ID, s.State, s.Loaded, s.Slots, s.ActiveSlots, s.QueuedRequests, s.MaxParallelSlots, s.ConfigVersion)
	}
	return nil
}
