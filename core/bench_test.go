package core

import (
	"context"
	"fmt"
	"testing"

	"golang.org/x/sync/semaphore"
)

// The hot path: a warm model with a spare slot; submit, grant, release.
// Beside it, in the same run, a golang.org/x/sync/semaphore acquire and
// release, the cheapest correct way to hand out slots; and the same hot path
// with 10,000 registered models and 10,000 waiters queued on other models,
// which must cost the same.

func warmMachine(b *testing.B, models, waiters int) (*Machine, Handle) {
	m, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	settle := func() {
		for len(m.Effects()) > 0 {
			effs := append([]Effect(nil), m.Effects()...)
			m.Advance()
			for _, e := range effs {
				var err error
				switch e.Kind {
				case EfStartLoad:
					err = m.LoadDone(0, e.Job, 16, false)
				case EfStartClone:
					err = m.CloneDone(0, e.Job, false)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for i := 0; i < models; i++ {
		m.SubmitManager(0, fmt.Sprintf("m%05d", i), OpApply, &Config{Engine: "fx", Slots: 1}, NoTimeout)
		settle()
	}
	m.SubmitManager(0, "hot", OpApply, &Config{Engine: "fx", Slots: 4}, NoTimeout)
	settle()
	// Waiters on other models: each of those has its one slot taken.
	for i := 0; i < waiters && models > 0; i++ {
		h := Handle(i % models)
		m.SubmitRequest(0, h, 0)
		m.SubmitRequest(0, h, 0)
		m.Advance()
	}
	if err := m.CheckInvariants(); err != nil {
		b.Fatal(err)
	}
	h, _ := m.Lookup("hot")
	return m, h
}

func benchHot(b *testing.B, models, waiters int) {
	m, h := warmMachine(b, models, waiters)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := m.SubmitRequest(int64(i), h, NoTimeout)
		if effs := m.Effects(); len(effs) != 1 || effs[0].Kind != EfGrant {
			b.Fatal("no grant")
		}
		m.Advance()
		if err := m.Release(int64(i), t, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHotPath(b *testing.B) { benchHot(b, 0, 0) }

func BenchmarkHotPath10kModels10kWaiters(b *testing.B) { benchHot(b, 10_000, 10_000) }

func BenchmarkSemaphoreBaseline(b *testing.B) {
	s := semaphore.NewWeighted(4)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		s.Release(1)
	}
}

// BenchmarkCheckInvariants is one full invariant walk of the hot path's
// machine, with a lease held, and of the 10,000-model one: the cost of
// one live check (core/runtime's Options.LiveInvariants), which the
// runtime pays once per N client events.
func BenchmarkCheckInvariants(b *testing.B) {
	for _, n := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("models=%d", n+1), func(b *testing.B) {
			m, h := warmMachine(b, n, n)
			m.SubmitRequest(0, h, NoTimeout)
			m.Advance()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.CheckInvariants(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
