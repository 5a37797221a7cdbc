package runtime

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// Busy names the work the runtime waits for, from the core's slot table
// and jobs: a request held at a gate (model, slot, ticket, request ID) and
// a load held at its gate (CONTRACT.md time.shutdown-stuck-native reports
// them when a shutdown's deadline passes).
func TestBusyNamesRequestsAndJobs(t *testing.T) {
	e := newEnv(t, core.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.apply("a", spec(2, `{"capacity":2}`))
	done := make(chan error, 2)
	go func() {
		_, err := e.rt.Infer(ctx, "a", backends.Request{ID: "req-7", Input: json.RawMessage(`{"gate":"gi"}`)}, InferOptions{})
		done <- err
	}()
	if err := e.fx.Gates().AwaitWaiting(ctx, "gi", 1); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := e.rt.Apply(ctx, "b", spec(1, `{"gates":{"load":"gl"}}`))
		done <- err
	}()
	if err := e.fx.Gates().AwaitWaiting(ctx, "gl", 1); err != nil {
		t.Fatal(err)
	}
	busy := e.rt.Busy()
	var req, load *Work
	for i := range busy {
		switch w := &busy[i]; {
		case w.Model == "a" && w.Kind == "request":
			req = w
		case w.Model == "b" && w.Kind == "load":
			load = w
		}
	}
	if req == nil || req.RequestID != "req-7" || req.Slot != 0 || req.Ticket == 0 || req.Running <= 0 {
		t.Fatalf("request not named: %+v", busy)
	}
	if load == nil || load.Slot != -1 || load.Running <= 0 {
		t.Fatalf("load not named: %+v", busy)
	}
	if len(busy) != 2 {
		t.Fatalf("busy: %+v", busy)
	}
	e.fx.Gates().Open("gi")
	e.fx.Gates().Open("gl")
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if busy := e.rt.Busy(); len(busy) != 0 {
		t.Fatalf("idle runtime busy: %+v", busy)
	}
}

// A lease notes its request ID without the runtime lock (a warm request
// through Acquire, Lease.Infer and Release takes the lock three times, not
// four: the server split's lock target): Lease.Infer completes while the test holds
// r.mu, and Busy then names the ID; after Release the table forgets it.
func TestLeaseNotesRequestIDWithoutTheLock(t *testing.T) {
	e := newEnv(t, core.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.apply("a", spec(1, `{}`))
	l, err := e.rt.Acquire(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	e.rt.mu.Lock()
	go func() {
		_, err := l.Infer(ctx, backends.Request{ID: "req-9", Input: json.RawMessage(`{}`)}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		e.rt.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		e.rt.mu.Unlock()
		<-done
		l.Release(false) // so the environment's shutdown does not wait for it
		t.Fatal("Lease.Infer waited for the runtime lock")
	}
	var named bool
	for _, w := range e.rt.Busy() {
		named = named || (w.Model == "a" && w.RequestID == "req-9")
	}
	if !named {
		t.Fatalf("busy does not name req-9: %+v", e.rt.Busy())
	}
	l.Release(false)
	if i := int(uint32(l.g.tk)); i < len(e.rt.reqIDs) && e.rt.reqIDs[i].cell != nil {
		t.Fatal("released lease still in the request-ID table")
	}
}
