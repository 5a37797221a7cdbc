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

// feedBuffer is how many lifecycle records the metrics feed may lag behind
// before the runtime drops it (it then subscribes again).
const feedBuffer = 1 << 12

// feedPause is how long the feed lets records gather after a batch before
// it takes the next one: one wake-up per batch instead of one per record
// keeps the feed's cost per request small under load (`make bench-http`).
// At 100k records/s a pause holds 500 records, far below feedBuffer.
const feedPause = 5 * time.Millisecond

// feed turns the runtime's lifecycle records (runtime.SubscribeLifecycle:
// backend steps only, so requests pay nothing for it) into the load and
// unload metrics: load durations (StartLoad until the pool's last session
// is built) and failures, and unload durations (StartTeardown to
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
	ch, cancel := rt.SubscribeLifecycle(feedBuffer) // subscribed before New returns: nothing is missed
	go f.run(ch, cancel)
	return f
}

// close stops the feed after it has taken every record already sent.
func (f *feed) close() {
	close(f.stop)
	<-f.done
}

func (f *feed) run(ch <-chan core.Record, cancel func()) {
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
		ch, cancel = f.rt.SubscribeLifecycle(feedBuffer)
	}
}

// consume applies records in batches until the channel is closed (dropped:
// true) or the feed is stopped (false, after draining what is buffered):
// it waits for a record, takes every record already sent, then pauses for
// feedPause.
func (f *feed) consume(ch <-chan core.Record, st *feedState) (dropped bool) {
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
func (f *feed) drain(ch <-chan core.Record, st *feedState) bool {
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

// feedState pairs start and end records.
type feedState struct {
	met       *metrics
	loads     map[string]*loadStart // by model
	jobs      map[uint64]string     // load and clone jobs -> model
	teardowns map[uint64]teardownStart
}

type loadStart struct {
	t     int64
	slots int
	built int
}

type teardownStart struct {
	model, cause string
	t            int64
}

func newFeedState(m *metrics) *feedState {
	return &feedState{met: m, loads: map[string]*loadStart{}, jobs: map[uint64]string{}, teardowns: map[uint64]teardownStart{}}
}

var (
	evLoadDone      = core.EvLoadDone.String()
	evCloneDone     = core.EvCloneDone.String()
	evTeardownDone  = core.EvTeardownDone.String()
	efStartLoad     = core.EfStartLoad.String()
	efStartClone    = core.EfStartClone.String()
	efStartTeardown = core.EfStartTeardown.String()
	causeFailedLoad = core.CauseFailedLoad.String()
)

func seconds(d int64) float64 { return float64(d) / 1e9 }

func (s *feedState) apply(r *core.Record) {
	switch {
	case r.Ef == efStartLoad:
		slots := 1
		if r.Config != nil && r.Config.Slots > 0 {
			slots = r.Config.Slots
		}
		s.loads[r.Model] = &loadStart{t: r.T, slots: slots}
		s.jobs[r.Job] = r.Model
	case r.Ef == efStartClone:
		s.jobs[r.Job] = r.Model
	case r.Ev == evLoadDone || r.Ev == evCloneDone:
		model, ok := s.jobs[r.Job]
		if !ok {
			return
		}
		delete(s.jobs, r.Job)
		l, ok := s.loads[model]
		if !ok {
			return
		}
		if r.Failed {
			s.met.loadFails.WithLabelValues(s.met.models.label(model)).Inc()
			delete(s.loads, model)
			return
		}
		if l.built++; l.built >= l.slots { // the pool is complete: published
			s.met.loads.WithLabelValues(s.met.models.label(model)).Observe(seconds(r.T - l.t))
			delete(s.loads, model)
		}
	case r.Ef == efStartTeardown:
		s.teardowns[r.Job] = teardownStart{model: r.Model, cause: r.Cause, t: r.T}
		if r.Cause == causeFailedLoad {
			if _, ok := s.loads[r.Model]; ok { // refused capacity after a successful open
				s.met.loadFails.WithLabelValues(s.met.models.label(r.Model)).Inc()
				delete(s.loads, r.Model)
			}
		}
	case r.Ev == evTeardownDone:
		if t, ok := s.teardowns[r.Job]; ok {
			delete(s.teardowns, r.Job)
			s.met.unloads.WithLabelValues(s.met.models.label(t.model), t.cause).Observe(seconds(r.T - t.t))
		}
	}
}
