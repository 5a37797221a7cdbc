// Package follow is the server's one follower of the runtime's steps: a
// single runtime subscription and a single goroutine that hand each batch
// of scheduler steps to every consumer, the Prometheus metrics
// (server/internal/metrics: load and unload histograms) and the event hub
// of GET /v1/events (server/internal/events).
//
// The subscription follows only the lifecycle (steps with backend work;
// requests pay nothing for it, their admission fast path stays on) until
// a consumer asks for every step with statuses (Full: the event hub, while
// a client watches), and back when none does. The change is one
// runtime.Reobserve: no step is lost or doubled across it, so the metrics
// never notice it, and the full steps start with a snapshot of every model
// for the hub.
package follow

import (
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/core/runtime"
)

// Defaults of the follower.
const (
	// Buffer is how many steps the follower may lag behind the scheduler,
	// following every step, before the runtime drops it (it then
	// subscribes again, and its consumers are told that steps were lost).
	Buffer = 1 << 15
	// LifecycleBuffer is Buffer while it follows the lifecycle only: far
	// fewer steps, and a smaller channel held for the process's life.
	LifecycleBuffer = 1 << 12
	// BatchMax bounds the steps handed over in one batch (one lock hold of
	// the event hub).
	BatchMax = 4096
	// Pause is how long the follower lets steps gather after a batch before
	// it takes the next: one wake-up per batch instead of one per step
	// keeps its cost per request small under load (`make bench-http`). At
	// 100k steps/s a pause holds 500 steps, far below Buffer.
	Pause = 5 * time.Millisecond
)

// Consumer is one user of the steps. Both methods are called on the
// follower's goroutine only, in order.
type Consumer interface {
	// Begin says the steps after it come from a new subscription, numbered
	// gen (increasing: Full returns the number of the one it makes). full
	// says they are every step with the statuses of the models it touched,
	// the first a snapshot of every model (a step of core.EvNone); else
	// they are the lifecycle steps only. lost says steps were lost before
	// them: the runtime dropped the follower for falling behind.
	Begin(gen uint64, full, lost bool)
	// Steps hands over a batch of steps in the scheduler's order. The
	// steps are shared: read only, and not kept past the call.
	Steps(batch []runtime.Step)
}

// Source is what the follower subscribes to: *runtime.Runtime.
type Source interface {
	Observe(o runtime.ObserveOptions) (<-chan runtime.Step, func())
	Reobserve(ch <-chan runtime.Step, o runtime.ObserveOptions) (<-chan runtime.Step, bool)
}

// Follower owns the subscription and its goroutine.
type Follower struct {
	src       Source
	log       *slog.Logger
	consumers []Consumer
	stop      chan struct{}
	done      chan struct{}

	mu sync.Mutex
	// links are the channels of the subscription the goroutine has still
	// to read, in order: the first is the one it reads; each Full that
	// changed the options closed the one before it and added one.
	links  []link
	cancel func()
	full   bool   // the options in force (or to subscribe with)
	gen    uint64 // the number of the newest subscription made
}

// link is one channel of the subscription with its number and options.
type link struct {
	ch   <-chan runtime.Step
	gen  uint64
	full bool
}

// Start subscribes to src (log nil: no logs), following the lifecycle, before it returns (no
// lifecycle step after it is missed), and starts the goroutine that hands
// the steps to consumers.
func Start(src Source, log *slog.Logger, consumers ...Consumer) *Follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Follower{src: src, log: log, consumers: consumers, stop: make(chan struct{}), done: make(chan struct{})}
	ch, cancel := src.Observe(f.options())
	f.gen, f.cancel = 1, cancel
	f.links = []link{{ch: ch, gen: 1}}
	go f.run(ch)
	return f
}

func (f *Follower) options() runtime.ObserveOptions {
	if f.full {
		return runtime.ObserveOptions{Buffer: Buffer, Status: true}
	}
	return runtime.ObserveOptions{Buffer: LifecycleBuffer, Lifecycle: true}
}

// Full switches the subscription to every step with statuses (true) or to
// the lifecycle only (false) and returns the number of the subscription
// that has the new options: the consumers' Begin tells them when its
// steps start (a larger number: a later subscription, with the options
// in force then). Switching to what is in force changes nothing.
func (f *Follower) Full(full bool) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full == full {
		return f.gen
	}
	f.full = full
	last := f.links[len(f.links)-1]
	if ch, ok := f.src.Reobserve(last.ch, f.options()); ok {
		f.gen++
		f.links = append(f.links, link{ch: ch, gen: f.gen, full: full})
		return f.gen
	}
	// The runtime dropped the subscription: the goroutine subscribes again,
	// with the options in force then, under the next number.
	return f.gen + 1
}

// Drop ends the subscription as the runtime does with an observer that
// fell behind (tests): the goroutine subscribes again and its consumers
// are told that steps were lost.
func (f *Follower) Drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancel()
}

// Close stops the goroutine after it handed over every step already sent,
// and ends the subscription.
func (f *Follower) Close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

// next is called when the channel the goroutine reads was closed: it
// returns the next channel with its number and options, and whether steps
// were lost (the runtime dropped the subscription, or Drop did, rather
// than Full replacing the channel).
func (f *Follower) next() (link, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.links) > 1 { // Full replaced it: the steps go on without a gap
		f.links = f.links[1:]
		return f.links[0], false
	}
	ch, cancel := f.src.Observe(f.options())
	f.gen++
	f.cancel = cancel
	f.links = []link{{ch: ch, gen: f.gen, full: f.full}}
	return f.links[0], true
}

// replaced is next for Close: the next channel if Full replaced the
// closed one; false if the runtime dropped it.
func (f *Follower) replaced() (link, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.links) > 1 {
		f.links = f.links[1:]
		return f.links[0], true
	}
	return link{}, false
}

// run follows first, the subscription of Start, and the channels after it.
func (f *Follower) run(first <-chan runtime.Step) {
	defer close(f.done)
	defer func() {
		f.mu.Lock()
		f.cancel()
		f.mu.Unlock()
	}()
	ch := first
	f.begin(1, false, false) // Start's options

	pause := time.NewTimer(Pause)
	pause.Stop()
	defer pause.Stop()
	batch := make([]runtime.Step, 0, 256)
	for {
		select {
		case st, ok := <-ch:
			if ok {
				batch = append(batch, st)
			}
			ok = drain(ch, &batch, ok)
			f.hand(&batch)
			if !ok {
				ch = f.resume()
				continue
			}
		case <-f.stop:
			f.final(ch, batch)
			return
		}
		pause.Reset(Pause)
		select {
		case <-pause.C:
		case <-f.stop:
			f.final(ch, batch)
			return
		}
	}
}

// resume goes on after the channel was closed, telling the consumers.
func (f *Follower) resume() <-chan runtime.Step {
	l, lost := f.next()
	if lost {
		f.log.Warn("the server's runtime follower fell behind the scheduler; resubscribing (event stream clients are told to reload, some metric samples are lost)")
	}
	f.begin(l.gen, l.full, lost)
	return l.ch
}

// final hands over what is already sent, following replaced channels, and
// stops at a closed one that was not replaced.
func (f *Follower) final(ch <-chan runtime.Step, batch []runtime.Step) {
	for {
		ok := drain(ch, &batch, true)
		for ok && len(batch) == BatchMax {
			f.hand(&batch)
			ok = drain(ch, &batch, true)
		}
		f.hand(&batch)
		if ok {
			return
		}
		l, ok := f.replaced()
		if !ok {
			return
		}
		f.begin(l.gen, l.full, false)
		ch = l.ch
	}
}

func (f *Follower) begin(gen uint64, full, lost bool) {
	for _, c := range f.consumers {
		c.Begin(gen, full, lost)
	}
}

// hand gives the batch to every consumer and empties it.
func (f *Follower) hand(batch *[]runtime.Step) {
	if len(*batch) == 0 {
		return
	}
	for _, c := range f.consumers {
		c.Steps(*batch)
	}
	clear(*batch) // drop the references to the steps' effects and statuses
	*batch = (*batch)[:0]
}

// drain appends the steps already sent, up to BatchMax; it reports false
// when ch was closed (or ok was false already).
func drain(ch <-chan runtime.Step, batch *[]runtime.Step, ok bool) bool {
	if !ok {
		return false
	}
	for len(*batch) < BatchMax {
		select {
		case st, ok := <-ch:
			if !ok {
				return false
			}
			*batch = append(*batch, st)
		default:
			return true
		}
	}
	return true
}
