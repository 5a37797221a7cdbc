package metrics

import (
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The feed turns the runtime's lifecycle steps into the load and unload
// metrics: load durations (StartLoad until the core's Publish) and
// failures, and unload durations (StartTeardown to TeardownDone).
// Admissions, rejections and waits come from the runtime's own counters
// (admissionCollector). Metrics is a consumer of the server's one runtime
// follower (server/internal/follow): it follows the lifecycle only while
// the event stream is unwatched (requests pay nothing for it) and every
// step while it is watched, and the feed applies the steps with backend
// work of either.

// Begin is told that the steps after it come from a new subscription of
// the follower; lost says steps were lost before them (the runtime dropped
// the follower for falling behind): the loads and teardowns under way are
// forgotten and their samples lost. A change of the follower's options
// loses nothing: what is under way is kept.
func (m *Metrics) Begin(_ uint64, _, lost bool) {
	if lost {
		m.feed = newFeedState(m)
	}
}

// Steps applies a batch of steps, in the scheduler's order.
func (m *Metrics) Steps(batch []runtime.Step) {
	for i := range batch {
		m.feed.apply(&batch[i])
	}
	m.applied()
}

// feedState pairs start and end effects: a load runs from its StartLoad
// to the core's Publish or to its failure (a failed LoadDone or CloneDone,
// or the teardown of a failed build's private sessions); a teardown from
// its StartTeardown to its TeardownDone.
type feedState struct {
	met       *Metrics
	loads     map[string]int64    // by model: when its load started
	jobs      map[core.Job]string // load and clone jobs -> model
	teardowns map[core.Job]teardownStart
}

type teardownStart struct {
	model, cause string
	t            int64
}

func newFeedState(m *Metrics) *feedState {
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
