package runtime

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/core"
)

// BeginShutdown is step (1) of Shutdown alone, at once: queued tickets are
// rejected with shutting_down and later submissions refused. A frontend
// calls it before it stops accepting, so that nothing it accepted is
// admitted after its shutdown began; Shutdown then drains. Calling it
// again does nothing.
func (r *Runtime) BeginShutdown() {
	r.beginOnce.Do(func() {
		close(r.stopping)
		now, xs := r.lockAt(r.clock()) // overdue tickets end server_busy, as they would have without the stall
		ev := core.Event{Kind: core.EvBeginShutdown, Now: now}
		r.m.BeginShutdown(ev.Now)
		var s sect
		r.afterLocked(now, &s, &ev, 0, nil)
		r.mu.Unlock()
		r.execExpired(xs)
		r.exec(&s)
	})
}

// Shutdown stops the runtime (CONTRACT.md time.shutdown-*):
//
//	(1) stop admitting: every queued ticket is rejected with shutting_down
//	    and new submissions are refused;
//	(2) admitted finite work (requests, granted managers, their loads)
//	    finishes, then every pool is torn down, until the core reports
//	    ShutdownComplete;
//	(3) if ctx ends first, backend work is cancelled through its context
//	    (engine calls, loads, gates) and (2) completes with that;
//	(4) every goroutine the runtime owns is joined.
//
// With a deadline it returns by the deadline plus the engines' cancellation
// latency; an engine that ignores its context, or a Lease never released,
// delays it. It returns nil when the work drained in time and an error
// wrapping ctx's cause when it had to cancel. Calling it again waits for the
// same shutdown.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.BeginShutdown() // (1)
	var err error
	select {
	case <-r.complete: // (2)
	case <-ctx.Done(): // (3)
		err = fmt.Errorf("runtime: shutdown deadline passed, backend work cancelled: %w", context.Cause(ctx))
		r.log.Warn("shutdown deadline passed; cancelling backend work")
		r.hardCancel()
		<-r.complete
	}
	r.joinOnce.Do(func() { // (4)
		r.wg.Wait()
		if r.tickStop != nil {
			close(r.tickStop)
			<-r.tickDone
			r.tickTimer.Stop()
		}
		r.hardCancel()
	})
	return err
}
