package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

// panicky wraps the fixture and panics where the checkpoint says:
// "panic-open", "panic-probe", "panic-clone", "panic-close"; any session
// panics in Infer when the input contains "panic".
type panicky struct{ *fixture.Engine }

func (p panicky) Name() string { return "panicky" }

func (p panicky) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	if spec.Checkpoint == "panic-open" {
		panic("boom in open")
	}
	s, c, err := p.Engine.Open(ctx, spec)
	if err != nil {
		return nil, 0, err
	}
	return panickySession{s, spec.Checkpoint}, c, nil
}

func (p panicky) Probe(ctx context.Context, spec backends.Spec) (int, error) {
	if spec.Checkpoint == "panic-probe" {
		panic("boom in probe")
	}
	return p.Engine.Probe(ctx, spec)
}

type panickySession struct {
	backends.Session
	mode string
}

func (s panickySession) Clone(ctx context.Context, i int) (backends.Session, error) {
	if s.mode == "panic-clone" {
		panic("boom in clone")
	}
	c, err := s.Session.Clone(ctx, i)
	if err != nil {
		return nil, err
	}
	return panickySession{c, s.mode}, nil
}

func (s panickySession) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if bytes.Contains(req.Input, []byte("panic")) {
		panic("boom in infer")
	}
	return s.Session.Infer(ctx, req, emit)
}

func (s panickySession) Close(ctx context.Context) error {
	err := s.Session.Close(ctx)
	if s.mode == "panic-close" {
		panic("boom in close")
	}
	return err
}

func panickySpec(slots int, checkpoint string) ModelSpec {
	return ModelSpec{Engine: "panicky", Checkpoint: checkpoint, Slots: slots, Options: json.RawMessage(`{}`)}
}

// leaseBalance checks that every Grant in recs has exactly one Release.
func leaseBalance(t *testing.T, recs []core.Record) {
	t.Helper()
	granted := map[uint64]int{}
	for _, r := range recs {
		switch {
		case r.Ef == "Grant":
			granted[r.Ticket]++
		case r.Ev == "Release":
			granted[r.Ticket]--
		}
	}
	for tk, n := range granted {
		if n != 0 {
			t.Errorf("ticket %d: grants minus releases = %d\n%s", tk, n, describe(recs))
		}
	}
}

// Every lease is released exactly once: on success, engine error, engine
// panic (in Infer or in the stream callback), cancellation while running,
// a failed stream write, and a deferred lease released twice.
func TestLeaseExactlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := fixture.New()
		e := newEnv(t, core.Options{}, withEngine("panicky", panicky{fx}))
		e.apply("a", panickySpec(2, "ck"))
		e.apply("f", spec(2, `{"chunks":3}`))
		_, stop := e.record()
		req := func(in string) backends.Request { return backends.Request{Input: json.RawMessage(in)} }

		if _, err := e.rt.Infer(bg, "a", req(`{}`), InferOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.rt.Infer(bg, "a", req(`{"fail":true}`), InferOptions{}); !errors.Is(err, ErrBackend) || !errors.Is(err, fixture.ErrInjected) {
			t.Fatalf("engine error: %v", err)
		}
		if _, err := e.rt.Infer(bg, "a", req(`{"panic":1}`), InferOptions{}); !errors.Is(err, ErrBackend) {
			t.Fatalf("engine panic: %v", err)
		}
		if _, err := e.rt.Infer(bg, "f", req(`{"infer_ms":"x"}`), InferOptions{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("invalid input: %v", err)
		}
		// Cancelled while running.
		ctx, cancel := context.WithCancel(bg)
		running := e.infer(ctx, "f", `{"gate":"g"}`, InferOptions{})
		synctest.Wait()
		cancel()
		if _, err := running.wait(); !errors.Is(err, ErrCancelled) {
			t.Fatalf("cancelled while running: %v", err)
		}
		// A stream whose client goes away after the first chunk.
		chunks := 0
		_, err := e.rt.Infer(bg, "f", backends.Request{Stream: true}, InferOptions{Emit: func(json.RawMessage) error {
			chunks++
			if chunks == 2 {
				return errors.New("client gone")
			}
			return nil
		}})
		if !errors.Is(err, ErrCancelled) || chunks != 2 {
			t.Fatalf("failed stream write: %v after %d chunks", err, chunks)
		}
		// A stream callback that panics.
		_, err = e.rt.Infer(bg, "f", backends.Request{Stream: true}, InferOptions{Emit: func(json.RawMessage) error {
			panic("callback boom")
		}})
		if !errors.Is(err, ErrBackend) {
			t.Fatalf("panicking callback: %v", err)
		}
		// A deferred lease released twice.
		l, err := e.rt.Acquire(bg, "f", nil)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := l.Infer(bg, backends.Request{}, nil); err != nil || decodeOut(t, out.JSON).Slot != l.Slot() {
			t.Fatalf("lease infer: %v %s", err, out.JSON)
		}
		if !l.Release(false) || l.Release(true) {
			t.Fatal("Release must release once")
		}
		if _, err := l.Infer(bg, backends.Request{}, nil); err == nil {
			t.Fatal("infer on a released lease")
		}
		for _, id := range []string{"a", "f"} {
			if st := e.status(id); st.ActiveSlots != 0 || !st.Loaded {
				t.Fatalf("%s: %+v", id, st)
			}
		}
		leaseBalance(t, stop())
	})
}

// A panic in a backend step (open, probe, clone, close) fails that step as
// a backend error; the model stays consistent and usable.
func TestBackendStepPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := fixture.New()
		e := newEnv(t, core.Options{}, withEngine("panicky", panicky{fx}))
		for _, ck := range []string{"panic-open", "panic-clone"} {
			if _, err := e.rt.Apply(bg, ck, panickySpec(2, ck)); !errors.Is(err, ErrBackend) {
				t.Fatalf("%s: %v", ck, err)
			}
			// The manager is answered when the step fails; the private
			// sessions of a failed clone may still be tearing down.
			if st := e.status(ck); st.Loaded || (st.State != core.Unloaded && st.State != core.Unloading) {
				t.Fatalf("%s: %+v", ck, st)
			}
		}
		synctest.Wait()
		e.apply("p", panickySpec(2, "ck"))
		if _, err := e.rt.Apply(bg, "p", panickySpec(3, "panic-probe")); !errors.Is(err, ErrBackend) {
			t.Fatalf("probe panic: %v", err)
		}
		if st := e.status("p"); !st.Loaded || st.Slots != 2 || st.ConfigVersion != 1 {
			t.Fatalf("probe panic changed the model: %+v", st)
		}
		e.apply("c", panickySpec(2, "panic-close"))
		if st, err := e.rt.Unload(bg, "c"); err != nil || st.Loaded {
			t.Fatalf("close panic: %v %+v", err, st)
		}
		if _, err := e.rt.Infer(bg, "c", backends.Request{}, InferOptions{}); err != nil {
			t.Fatalf("reload after close panic: %v", err)
		}
		if n := fx.OpenSessions(); n != 4 {
			t.Fatalf("%d sessions open, want two each for p and c", n)
		}
		if _, err := e.rt.Unload(bg, "c"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.rt.Unload(bg, "p"); err != nil {
			t.Fatal(err)
		}
		if n := fx.OpenSessions(); n != 0 {
			t.Fatalf("%d sessions open", n)
		}
	})
}

// A stream holds its lease while it waits between chunks (here at a
// chunk gate); the lease is released when the stream ends.
func TestStreamHoldsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		e.apply("a", spec(1, `{"chunks":3,"chunk_ms":5}`))
		var got []fixtureOut
		s := start(func() (Result, error) {
			return e.rt.Infer(bg, "a", backends.Request{Stream: true, Input: json.RawMessage(`{"chunk_gate":"c"}`)},
				InferOptions{Emit: func(c json.RawMessage) error {
					got = append(got, decodeOut(t, c))
					return nil
				}})
		})
		synctest.Wait()
		if st := e.status("a"); st.ActiveSlots != 1 || len(got) != 1 {
			t.Fatalf("stream at its chunk gate: %+v, %d chunks", st, len(got))
		}
		e.fx.Gates().Open("c")
		if _, err := s.wait(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || *got[2].Chunk != 2 {
			t.Fatalf("chunks %+v", got)
		}
		if st := e.status("a"); st.ActiveSlots != 0 {
			t.Fatalf("%+v", st)
		}
	})
}

// A manager whose client goes away after it was granted runs to completion.
func TestDisconnectedManagerRunsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, core.Options{})
		ctx, cancel := context.WithCancel(bg)
		c := start(func() (core.ModelStatus, error) {
			return e.rt.Apply(ctx, "a", spec(1, `{"gates":{"load":"l"}}`))
		})
		synctest.Wait()
		cancel()
		if _, err := c.wait(); !errors.Is(err, ErrCancelled) {
			t.Fatalf("%v", err)
		}
		if st := e.status("a"); st.State != core.Loading {
			t.Fatalf("%+v", st)
		}
		e.fx.Gates().Open("l")
		synctest.Wait()
		if st := e.status("a"); !st.Loaded {
			t.Fatalf("the granted manager did not finish: %+v", st)
		}
	})
}

// Bulk unload: unknown IDs never fail the known ones; duplicates count once.
func TestBulkUnload(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", spec(1, `{}`))
	e.apply("b", spec(2, `{}`))
	res, err := e.rt.BulkUnload(bg, []string{"a", "x", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unloaded) != 2 || res.Unloaded[0] != "a" || res.Unloaded[1] != "b" || len(res.NotFound) != 1 || res.NotFound[0] != "x" {
		t.Fatalf("%+v", res)
	}
	for _, st := range e.rt.Status() {
		if st.Loaded {
			t.Fatalf("%+v", st)
		}
	}
	if res, err := e.rt.BulkUnload(bg, nil); err != nil || len(res.Unloaded)+len(res.NotFound) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

// A subscriber that stops reading is dropped without blocking the scheduler.
func TestSlowSubscriberDropped(t *testing.T) {
	e := newEnv(t, core.Options{})
	ch, stop := e.rt.Subscribe(2)
	defer stop()
	e.apply("a", spec(1, `{}`))
	n := 0
	for range ch {
		n++
	}
	if n != 2 {
		t.Fatalf("received %d records before the drop, want the buffer's 2", n)
	}
	if _, err := e.rt.Infer(bg, "a", backends.Request{}, InferOptions{}); err != nil {
		t.Fatal(err)
	}
}
