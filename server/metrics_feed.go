package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// feedBuffer is how many lifecycle steps the metrics feed may lag behind
// before the runtime drops it (it then subscribes again).
const feedBuffer = 1 << 12

// feedPause is how long the feed lets records gather after a batch before
// it takes the next one: one wake-up per batch instead of one per record
// keeps the feed's cost per request small under load (`make bench-http`).
// At 100k steps/s a pause holds 500 steps, far below feedBuffer.
const feedPause = 5 * time.Millisecond

// feed turns the runtime's lifecycle steps (runtime.Observe with
// Lifecycle: backend work only, so requests pay nothing for it) into the
// load and unload metrics: load durations (StartLoad until the core's
// Publish) and failures, and unload durations (StartTeardown to
// TeardownDone). Admissions, rejections and waits come from the runtime's
// own counters (admissionCollector). It runs on its own goroutine, outside
// the scheduler lock; stop joins it.
type feed struct {
	rt   *runtime.Runtime
	met  *metrics
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}

	// watched turns on change notifications (tests): changed is closed and
	// replaced after every record applied.
	watched atomic.Bool
	wmu     sync.Mutex
	changed chan struct{}
}

// applied notes that a record was applied.
func (f *feed) applied() {
	if !f.watched.Load() {
		return
	}
	f.wmu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.wmu.Unlock()
}

// await blocks until cond holds, re-checking after every record the feed
// applies, or until ctx ends (tests).
func (f *feed) await(ctx context.Context, cond func() bool) error {
	f.watched.Store(true)
	for {
		f.wmu.Lock()
		ch := f.changed
		f.wmu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func startFeed(rt *runtime.Runtime, met *metrics, log *slog.Logger) *feed {
	f := &feed{rt: rt, met: met, log: log, stop: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{})}
	ch, cancel := rt.Observe(runtime.ObserveOptions{Buffer: feedBuffer, Lifecycle: true}) // before New returns: nothing is missed
	go f.run(ch, cancel)
	return f
}

// close stops the feed after it has taken every record already sent.
func (f *feed) close() {
	close(f.stop)
	<-f.done
}

func (f *feed) run(ch <-chan runtime.Step, cancel func()) {
	defer close(f.done)
	st := newFeedState(f.met)
	for {
		dropped := f.consume(ch, st)
		cancel()
		if !dropped {
			return
		}
		f.log.Warn("metrics feed fell behind the scheduler; resubscribing (some samples are lost)")
		st = newFeedState(f.met)
		ch, cancel = f.rt.Observe(runtime.ObserveOptions{Buffer: feedBuffer, Lifecycle: true})
	}
}

// consume applies steps in batches until the channel is closed (dropped:
// true) or the feed is stopped (false, after draining what is buffered):
// it waits for a record, takes every record already sent, then pauses for
// feedPause.
func (f *feed) consume(ch <-chan runtime.Step, st *feedState) (dropped bool) {
	pause := time.NewTimer(feedPause)
	pause.Stop()
	defer pause.Stop()
	for {
		select {
		case rec, ok := <-ch:
			if !ok {
				return true
			}
			st.apply(&rec)
		case <-f.stop:
			return !f.drain(ch, st)
		}
		if !f.drain(ch, st) {
			return true
		}
		f.applied()
		pause.Reset(feedPause)
		select {
		case <-pause.C:
		case <-f.stop:
			return !f.drain(ch, st)
		}
	}
}

// drain applies every record already in ch; it reports false when ch was
// closed.
func (f *feed) drain(ch <-chan runtime.Step, st *feedState) bool {
	for {
		select {
		case rec, ok := <-ch:
			if !ok {
				return false
			}
			st.apply(&rec)
		default:
			return true
		}
	}
}

// feedState pairs start and end effects: a load runs from its StartLoad
// to the core's Publish or to its failure (a failed LoadDone or CloneDone,
// or the teardown of a failed build's private sessions); a teardown from
// its StartTeardown to its TeardownDone.
type feedState struct {
	met       *metrics
	loads     map[string]int64    // by model: when its load started
	jobs      map[core.Job]string // load and clone jobs -> model
	teardowns map[core.Job]teardownStart
}

type teardownStart struct {
	model, cause string
	t            int64
}

func newFeedState(m *metrics) *feedState {
	return &feedState{met: m, loads: map[string]int64{}, jobs: map[core.Job]string{}, teardowns: map[core.Job]teardownStart{}}
}

func seconds(d int64) float64 { return float64(d) / 1e9 }

func (s *feedState) apply(st *runtime.Step) {
	now := st.Event.Now
	switch st.Event.Kind {
	case core.EvLoadDone, core.EvCloneDone:
		model, ok := s.jobs[st.Event.Job]
		delete(s.jobs, st.Event.Job)
		if ok && st.Event.Failed {
			s.failed(model)
		}
	case core.EvTeardownDone:
		if t, ok := s.teardowns[st.Event.Job]; ok {
			delete(s.teardowns, st.Event.Job)
			s.met.unloads.WithLabelValues(s.met.models.label(t.model), t.cause).Observe(seconds(now - t.t))
		}
	}
	for i := range st.Effects {
		e := &st.Effects[i]
		switch e.Kind {
		case core.EfStartLoad:
			s.loads[e.ID] = now
			s.jobs[e.Job] = e.ID
		case core.EfStartClone:
			s.jobs[e.Job] = e.ID
		case core.EfPublish:
			if t0, ok := s.loads[e.ID]; ok {
				s.met.loads.WithLabelValues(s.met.models.label(e.ID)).Observe(seconds(now - t0))
				delete(s.loads, e.ID)
			}
		case core.EfStartTeardown:
			s.teardowns[e.Job] = teardownStart{model: e.ID, cause: e.Cause.String(), t: now}
			if e.Cause == core.CauseFailedLoad { // a clone failed, or the capacity was refused after a successful open
				s.failed(e.ID)
			}
		}
	}
}

// failed counts the failure of model's running load, once.
func (s *feedState) failed(model string) {
	if _, ok := s.loads[model]; ok {
		s.met.loadFails.WithLabelValues(s.met.models.label(model)).Inc()
		delete(s.loads, model)
	}
}
