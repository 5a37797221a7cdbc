package sim

import (
	"github.com/sluice-dev/sluice/core"
)

// markKind names a point event drawn on the timeline.
type markKind uint8

const (
	markFail     markKind = iota + 1 // a backend step failed
	markTeardown                     // a pool teardown started
	markShutdown                     // BeginShutdown
)

// maxTimelineSamples bounds what a long run records; later changes are
// dropped and the timeline says where it stopped.
const maxTimelineSamples = 400_000

// TimelineSample is one model's status from time T until the next sample.
type TimelineSample struct {
	T       int64
	State   core.State
	Loaded  bool
	Slots   uint8  // configured slots
	Active  uint8  // admitted requests (running or waiting for the pool)
	Running uint8  // granted requests holding a lease
	Queued  uint16 // queued requests
	Mgrs    uint8  // queued managers
}

// TimelineMark is a point event on a model's lane (or on all lanes).
type TimelineMark struct {
	T     int64
	Model int // index into Models, -1 for all
	Kind  string
	What  string
}

// TimelineModel is one model's samples.
type TimelineModel struct {
	ID      string
	Samples []TimelineSample
}

// Timeline is what a run recorded for its picture: per-model state, slots
// and queues over virtual time, and point events.
type Timeline struct {
	Title     string
	Subtitle  string
	End       int64
	Truncated int64 // virtual time after which nothing was recorded, 0 if none
	Models    []TimelineModel
	Marks     []TimelineMark
}

type timelineRec struct {
	models    [][]TimelineSample
	marks     []TimelineMark
	n         int
	truncated int64
}

func (tl *timelineRec) sample(now int64, h core.Handle, s *core.ModelStatus, running int) {
	for int(h) >= len(tl.models) {
		tl.models = append(tl.models, nil)
	}
	x := TimelineSample{T: now, State: s.State, Loaded: s.Loaded, Slots: uint8(s.Slots), Active: uint8(s.ActiveSlots),
		Running: uint8(running), Queued: uint16(min(s.QueuedRequests, 65535)), Mgrs: uint8(min(s.QueuedManagers, 255))}
	xs := tl.models[h]
	if n := len(xs); n > 0 {
		last := xs[n-1]
		last.T = now
		if last == x {
			return
		}
		if xs[n-1].T == now {
			xs[n-1] = x
			return
		}
	}
	if tl.n >= maxTimelineSamples {
		if tl.truncated == 0 {
			tl.truncated = now
		}
		return
	}
	tl.n++
	tl.models[h] = append(xs, x)
}

func (tl *timelineRec) mark(now int64, h core.Handle, k markKind, what string) {
	if tl.truncated != 0 || len(tl.marks) > maxTimelineSamples/4 {
		return
	}
	m := TimelineMark{T: now, Model: int(h), What: what}
	switch k {
	case markFail:
		m.Kind = "fail"
	case markTeardown:
		m.Kind = "teardown"
	case markShutdown:
		m.Kind, m.Model = "shutdown", -1
	}
	tl.marks = append(tl.marks, m)
}

func (tl *timelineRec) finish(w *world, title, subtitle string) *Timeline {
	t := &Timeline{Title: title, Subtitle: subtitle, End: w.now, Truncated: tl.truncated, Marks: tl.marks}
	for h := range w.m.Len() {
		var xs []TimelineSample
		if h < len(tl.models) {
			xs = tl.models[h]
		}
		t.Models = append(t.Models, TimelineModel{ID: w.m.ID(core.Handle(h)), Samples: xs})
	}
	if w.fail != nil {
		t.Marks = append(t.Marks, TimelineMark{T: w.fail.Time, Model: -1, Kind: "failure", What: w.fail.Check})
	}
	return t
}
