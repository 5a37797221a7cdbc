package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/edge"
)

// Serve accepts connections on ln until Shutdown. It returns nil once
// Shutdown has closed the listener, or the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.log.Info("listening", "addr", ln.Addr().String(), "parallel_jobs", s.cfg.ParallelJobs,
		"ui_management", s.cfg.UIManagement, "fixture", s.cfg.Fixture, "tls", s.tls != nil)
	err := s.hs.Serve(s.listener(ln))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Run serves ln until ctx ends, then shuts down within
// Config.ShutdownTimeout (0: no bound) and returns Shutdown's error. It is
// what `sluice serve` does between startup and exit.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	select {
	case err := <-served:
		if err != nil {
			_ = s.Shutdown(context.Background())
			return fmt.Errorf("server: %w", err)
		}
	case <-ctx.Done():
	}
	sctx := context.Background()
	if s.cfg.ShutdownTimeout > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(sctx, s.cfg.ShutdownTimeout)
		defer cancel()
	}
	err := s.Shutdown(sctx)
	if serr := <-served; serr != nil && err == nil {
		err = serr
	}
	return err
}

// Shutdown stops the server (CONTRACT.md time.shutdown-*). ctx's deadline
// bounds the whole exit
// (--shutdown-timeout):
//
//	(1) /readyz turns 503 at once.
//	(2) The runtime begins its shutdown: every queued request and manager is
//	    answered 503 shutting_down at once, new submissions get it too,
//	    admitted work (requests, granted managers, their loads) goes on, and
//	    idle pools are torn down (runtime.Shutdown, on its own goroutine).
//	    Live sessions (GET /v1/realtime) are told to end: each commits its
//	    turn in progress and closes with 1001 (CONTRACT.md live.shutdown);
//	    their connections are hijacked, so once the slice loop is done
//	    Shutdown waits for their handlers (at ctx's end it closes their
//	    sockets at once).
//	(3) The listener closes and idle connections are closed
//	    (http.Server.Shutdown): nothing new is accepted.
//	(4) Slice loop: every edge.TickEvery, every open connection gets a deadline
//	    a slice after its last progress (internal/edge): a stalled header, a
//	    stalled body or a client that does not read its response fails
//	    within one slice of at most 250 ms, and its handler returns and
//	    releases what it held. Handlers that make progress finish.
//	(5) When the last connection has closed (every handler has returned),
//	    the runtime's drain ends: leases are released, pools torn down,
//	    backend goroutines joined.
//	(6) A quarter of the timeout before ctx's deadline (at most
//	    deadlineGrace before it), the runtime cancels backend work through
//	    its context. Handlers whose work was cancelled answer their
//	    clients meanwhile: a waiter whose cold load was cancelled gets 500
//	    internal_error, a cancelled inference 503 shutting_down
//	    (CONTRACT.md ops.loading.shutdown, time.shutdown-cold-load). When
//	    ctx ends, every connection still open is closed at once, and
//	    Shutdown waits only for the handlers and backend steps to observe
//	    the cancellation (the engines' cancellation latency).
//
// It returns nil when everything drained in time, else an error wrapping
// ctx's cause. Calling it again waits for the first call and returns its
// result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.shutdownErr = s.shutdown(ctx)
		close(s.shutdownDone)
	})
	<-s.shutdownDone
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	start := time.Now()
	s.stopping.Store(true) // (1)
	s.log.Info("shutting down", "deadline", deadlineOf(ctx))
	empty := s.edge.BeginShutdown(start)

	// (2) The runtime refuses new work before the listener closes, so a
	// request the listener accepted is never admitted after shutdown began
	// (CONTRACT.md time.shutdown-new-submission).
	s.rt.BeginShutdown()
	s.live.Shutdown() // live sessions commit their turn and close with 1001 (CONTRACT.md live.shutdown)
	rtCtx, rtCancel := runtimeDeadline(ctx)
	defer rtCancel()
	rtDone := make(chan error, 1)
	go func() { rtDone <- s.rt.Shutdown(rtCtx) }()

	hctx, hcancel := context.WithCancel(context.Background()) // (3)
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		_ = s.hs.Shutdown(hctx) // returns early once hcancel runs; the slice loop owns the wait
	}()

	var err error
	ticker := time.NewTicker(edge.TickEvery) // (4)
	s.edge.Tick(time.Now())
wait:
	for {
		select {
		case <-empty:
			break wait
		case now := <-ticker.C:
			s.edge.Tick(now)
		case <-ctx.Done(): // (6)
			err = fmt.Errorf("server: shutdown deadline passed: %w", context.Cause(ctx))
			s.log.Warn("shutdown deadline passed; closing every connection", "open", s.edge.Count())
			_ = s.hs.Close()
			<-empty
			break wait
		}
	}
	ticker.Stop()
	s.live.Wait(ctx) // hijacked: the tracker no longer sees them
	hcancel()
	<-httpDone
	_ = s.hs.Close()

	if rerr := <-rtDone; rerr != nil && err == nil { // (5)
		err = fmt.Errorf("server: %w", rerr)
	}
	s.follow.Close()
	s.events.Close()
	if s.trace != nil {
		if cerr := s.trace.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("server: trace file: %w", cerr)
		}
	}
	if cerr := s.store.Close(); cerr != nil && err == nil { // the state dir's lock (CONTRACT.md persist.lock)
		err = fmt.Errorf("server: state dir: %w", cerr)
	}
	s.log.Info("shut down", "took", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// deadlineGrace is the most time, before the shutdown deadline, that
// handlers get to answer for backend work the runtime cancelled: the
// runtime's deadline comes a quarter of the timeout earlier, at most this
// much, so --shutdown-timeout still bounds the whole exit.
const deadlineGrace = time.Second

// runtimeDeadline returns the context the runtime's shutdown runs under:
// ctx with its deadline moved earlier by min(deadlineGrace, a quarter of
// the time left). Without a deadline it is ctx.
func runtimeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	grace := min(deadlineGrace, time.Until(dl)/4)
	return context.WithDeadline(ctx, dl.Add(-grace))
}

func deadlineOf(ctx context.Context) string {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d).Round(time.Millisecond).String()
	}
	return "none"
}

// StuckWork returns the work a shutdown still waits for: every admitted
// request (model, slot, request ID, how long it has held its slot) and
// every backend job (model, kind, how long it has run), from the runtime's
// view of the core (runtime.Busy). Past the shutdown deadline it is the
// work that ignored its cancellation, like a native call that cannot be
// interrupted (CONTRACT.md time.shutdown-stuck-native).
func (s *Server) StuckWork() []runtime.Work { return s.rt.Busy() }

// LogStuckWork logs one error line per piece of StuckWork and a summary
// with the connections still open; the process exit that gives up on them
// calls it (cmd/sluice). It returns how many pieces it named.
func (s *Server) LogStuckWork() int {
	work := s.StuckWork()
	for _, w := range work {
		attrs := []any{slog.String("model", w.Model), slog.String("kind", w.Kind),
			slog.Duration("running", w.Running.Round(time.Millisecond))}
		if w.Kind == "request" {
			attrs = append(attrs, slog.Int("slot", w.Slot), slog.String("request_id", w.RequestID))
		}
		s.log.Error("shutdown gave up on work that ignores cancellation", attrs...)
	}
	s.log.Error("exiting with work still running", "stuck", len(work), "open_connections", s.edge.Count())
	return len(work)
}
