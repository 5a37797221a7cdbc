package sim

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// WhatIf is a changed configuration for a what-if replay of a recorded
// trace (`sluice sim --replay TRACE --slots N ...`). A nil field keeps
// what the trace ran with.
type WhatIf struct {
	// Slots, when positive, replaces the slots of every registration and
	// reconfiguration in the trace.
	Slots int
	// MaxLoadedModels, MemoryBudgetMB: core.Options of the same names.
	MaxLoadedModels *int
	MemoryBudgetMB  *int64
	// AdmissionTimeout replaces every request's admission timeout (its own
	// and the default; 0: unbounded).
	AdmissionTimeout *time.Duration
	// Record, when set, receives the replay's own trace (the runtime's
	// ndjson core.Record lines), which ReplayTrace replays exactly under
	// the what-if's options.
	Record io.Writer
}

// Changed reports whether w changes anything.
func (w WhatIf) Changed() bool {
	return w.Slots > 0 || w.MaxLoadedModels != nil || w.MemoryBudgetMB != nil || w.AdmissionTimeout != nil
}

func (w WhatIf) options(o core.Options) core.Options {
	if w.MaxLoadedModels != nil {
		o.MaxLoadedModels = *w.MaxLoadedModels
	}
	if w.MemoryBudgetMB != nil {
		o.MemoryBudgetMB = *w.MemoryBudgetMB
	}
	if w.AdmissionTimeout != nil {
		o.DefaultAdmissionTimeout = int64(*w.AdmissionTimeout)
	}
	return o
}

// recEvent is one event record of a trace with its effect records.
type recEvent struct {
	ev   core.Record
	effs []core.Record
}

// readTrace parses the ndjson core.Record lines of r.
func readTrace(r io.Reader) ([]recEvent, error) {
	var out []recEvent
	err := eachEvent(r, "what-if", func(_ int, e recEvent) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// eachEvent reads the ndjson core.Record lines of r and calls fn with each
// event record, its line and the effect records that follow it, in order,
// once the next event (or the end) shows they are all there; it reads as
// it goes, so a long trace is never held whole. what names the caller in
// errors.
func eachEvent(r io.Reader, what string, fn func(line int, e recEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var cur *recEvent
	curLine := 0
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var rec core.Record
		if err := json.Unmarshal([]byte(b), &rec); err != nil {
			return fmt.Errorf("sim: %s: line %d: not a core.Record: %w", what, line, err)
		}
		switch {
		case rec.Ev != "":
			if cur != nil {
				if err := fn(curLine, *cur); err != nil {
					return err
				}
			}
			cur, curLine = &recEvent{ev: rec}, line
		case rec.Ef != "" && cur != nil:
			cur.effs = append(cur.effs, rec)
		default:
			return fmt.Errorf("sim: %s: line %d: neither an event nor an effect after one", what, line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sim: %s: %w", what, err)
	}
	if cur != nil {
		return fn(curLine, *cur)
	}
	return nil
}

// jobTime is one recorded backend job: how long it took and how it ended.
type jobTime struct {
	dur      int64
	failed   bool
	capacity int
}

type jobKey struct {
	model string
	kind  core.EventKind // the completion event
}

// recorded is what a trace says about the world outside core: when each
// client acted, how long each granted request held its slot, how long each
// backend job took.
type recorded struct {
	service map[uint64]int64 // request ticket -> grant to release
	failed  map[uint64]bool  // request ticket -> its release reported a failure
	median  map[string]int64 // model -> median service (for requests never granted in the trace)
	jobs    map[jobKey][]jobTime
}

// completionOf names the completion event of a job-starting effect.
var completionOf = map[string]core.EventKind{
	core.EfStartLoad.String():     core.EvLoadDone,
	core.EfStartClone.String():    core.EvCloneDone,
	core.EfStartProbe.String():    core.EvProbeDone,
	core.EfStartTeardown.String(): core.EvTeardownDone,
}

func learn(evs []recEvent) (*recorded, error) {
	rc := &recorded{service: map[uint64]int64{}, failed: map[uint64]bool{}, median: map[string]int64{}, jobs: map[jobKey][]jobTime{}}
	modelOf := map[uint64]string{}
	granted := map[uint64]int64{}
	type started struct {
		model string
		kind  core.EventKind
		at    int64
	}
	jobs := map[uint64]started{}
	perModel := map[string][]int64{}
	for k := range evs {
		e := &evs[k]
		ev, err := e.ev.Event()
		if err != nil {
			return nil, fmt.Errorf("sim: what-if: %w", err)
		}
		switch ev.Kind {
		case core.EvSubmitRequest:
			modelOf[e.ev.Ticket] = ev.Model
		case core.EvRelease:
			if at, ok := granted[e.ev.Ticket]; ok {
				d := ev.Now - at
				rc.service[e.ev.Ticket] = d
				rc.failed[e.ev.Ticket] = ev.Failed
				perModel[modelOf[e.ev.Ticket]] = append(perModel[modelOf[e.ev.Ticket]], d)
				delete(granted, e.ev.Ticket)
			}
		case core.EvLoadDone, core.EvCloneDone, core.EvProbeDone, core.EvTeardownDone:
			if s, ok := jobs[e.ev.Job]; ok && s.kind == ev.Kind {
				k := jobKey{s.model, s.kind}
				rc.jobs[k] = append(rc.jobs[k], jobTime{dur: ev.Now - s.at, failed: ev.Failed, capacity: ev.Capacity})
				delete(jobs, e.ev.Job)
			}
		}
		for _, f := range e.effs {
			if f.Ef == core.EfGrant.String() {
				granted[f.Ticket] = f.T
			}
			if kind, ok := completionOf[f.Ef]; ok {
				jobs[f.Job] = started{model: f.Model, kind: kind, at: f.T}
			}
		}
	}
	for m, ds := range perModel {
		slices.Sort(ds)
		rc.median[m] = ds[(len(ds)-1)/2]
	}
	return rc, nil
}

// nextJob returns the next recorded job of model and kind: the recorded
// ones in order, then (a what-if that starts more of them) their median,
// successful. A model with none of that kind recorded: a clone takes the
// median of the model's own loads (every engine's Clone opens one more
// session as its load opened the first, so a trace recorded with one slot,
// which has no clones, still says what a --slots what-if's clones cost;
// taking them as free published a cold pool a clone per slot early), and
// any other kind the median over all models.
func (rc *recorded) nextJob(model string, kind core.EventKind, used map[jobKey]int) jobTime {
	k := jobKey{model, kind}
	n := used[k]
	used[k] = n + 1
	if js := rc.jobs[k]; n < len(js) {
		return js[n]
	}
	if d, ok := rc.medianJob(model, kind); ok {
		return jobTime{dur: d}
	}
	if kind == core.EvCloneDone {
		if d, ok := rc.medianJob(model, core.EvLoadDone); ok {
			return jobTime{dur: d}
		}
	}
	if d, ok := rc.medianJob("", kind); ok {
		return jobTime{dur: d}
	}
	return jobTime{}
}

// medianJob is the median duration of the recorded jobs of kind of model
// (every model: model empty), and whether there are any.
func (rc *recorded) medianJob(model string, kind core.EventKind) (int64, bool) {
	var ds []int64
	for x, js := range rc.jobs {
		if x.kind == kind && (model == "" || x.model == model) {
			for _, j := range js {
				ds = append(ds, j.dur)
			}
		}
	}
	if len(ds) == 0 {
		return 0, false
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)/2], true
}

// pending is one event of the what-if world, due at a time.
type pending struct {
	at, seq int64
	ev      core.Event
	orig    uint64 // a client event's recorded ticket (submissions, cancels)
}

type pendingHeap []pending

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// WhatIfTraceFile is WhatIfTrace of the trace at path, under the options
// recorded beside it (as ReplayTraceFile) or opts.
func WhatIfTraceFile(path string, opts core.Options, w WhatIf) (*TraceReplay, error) {
	if b, err := os.ReadFile(strings.TrimSuffix(path, ".ndjson") + ".options.json"); err == nil {
		if err := json.Unmarshal(b, &opts); err != nil {
			return nil, fmt.Errorf("sim: what-if: options: %w", err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim: what-if: %w", err)
	}
	defer f.Close()
	return WhatIfTrace(f, opts, w)
}

// WhatIfTrace replays a recorded trace in virtual time under a changed
// configuration: the clients' submissions, disconnects and shutdown at
// their recorded times, each granted request holding its slot as long as
// it did in the trace (a request the trace never granted: its model's
// median), each backend job taking as long as the model's job of the same
// kind did, in order (more jobs than recorded: their median; the clones
// of a model the trace never cloned: its load's, see nextJob), and core's
// deadlines (admission timeouts, idle retirement, load backoff) on Ticks
// at core's NextDeadline. Recorded Ticks and timeouts are not replayed:
// core decides them anew. It returns the per-model waits, server_busy
// refusals and loads of the replay; Diverged stays nil (nothing is
// compared with the trace's effects).
func WhatIfTrace(r io.Reader, opts core.Options, w WhatIf) (*TraceReplay, error) {
	evs, err := readTrace(r)
	if err != nil {
		return nil, err
	}
	rc, err := learn(evs)
	if err != nil {
		return nil, err
	}
	m, err := core.New(w.options(opts))
	if err != nil {
		return nil, fmt.Errorf("sim: what-if: %w", err)
	}
	var q pendingHeap
	var seq int64
	push := func(p pending) {
		seq++
		p.seq = seq
		heap.Push(&q, p)
	}
	for k := range evs {
		ev, err := evs[k].ev.Event()
		if err != nil {
			return nil, fmt.Errorf("sim: what-if: %w", err)
		}
		switch ev.Kind {
		case core.EvSubmitRequest, core.EvSubmitManager, core.EvSubmitBulkUnload, core.EvBeginShutdown:
		case core.EvCancel:
			if ev.Reason != core.ReasonDisconnect {
				continue // timeouts are core's to decide anew
			}
		default:
			continue // releases, completions and ticks follow from the replay
		}
		if ev.Kind == core.EvSubmitRequest && w.AdmissionTimeout != nil {
			ev.Timeout = int64(*w.AdmissionTimeout)
		}
		if ev.Config != nil && w.Slots > 0 {
			c := *ev.Config
			c.Slots = w.Slots
			ev.Config = &c
		}
		push(pending{at: ev.Now, ev: ev, orig: evs[k].ev.Ticket})
	}
	rep := &TraceReplay{}
	st := replayStats{models: map[string]*ReplayModel{}, submitted: map[core.Ticket]submit{}}
	tickets := map[uint64]core.Ticket{} // recorded ticket -> the replay's
	origOf := map[core.Ticket]uint64{}
	used := map[jobKey]int{}
	tickAt := int64(0)
	for q.Len() > 0 {
		p := heap.Pop(&q).(pending)
		ev := p.ev
		ev.Now = p.at
		switch ev.Kind {
		case core.EvTick:
			if p.at != tickAt {
				continue // superseded by an earlier deadline
			}
			tickAt = 0
			if nd := m.NextDeadline(); nd == 0 || nd > p.at {
				if nd > 0 {
					tickAt = nd
					push(pending{at: nd, ev: core.Event{Kind: core.EvTick}})
				}
				continue
			}
		case core.EvCancel:
			tk, ok := tickets[p.orig]
			if !ok {
				continue
			}
			ev.Ticket = tk
		}
		tk, _, aerr := apply(m, &ev)
		effs := m.Effects()
		if w.Record != nil {
			if err := writeRecords(w.Record, m, &ev, tk, effs); err != nil {
				return nil, err
			}
		}
		rep.Events++
		rep.Effects += len(effs)
		if aerr == nil && p.orig != 0 && (ev.Kind == core.EvSubmitRequest || ev.Kind == core.EvSubmitManager ||
			ev.Kind == core.EvSubmitBulkUnload) {
			tickets[p.orig] = tk
			origOf[tk] = p.orig
		}
		st.event(m, &ev, tk, effs)
		for _, e := range effs {
			switch e.Kind {
			case core.EfGrant:
				d, ok := rc.service[origOf[e.Ticket]]
				if !ok {
					d = rc.median[m.EffectRecord(ev.Now, e).Model]
				}
				push(pending{at: ev.Now + d, ev: core.Event{Kind: core.EvRelease, Ticket: e.Ticket,
					Failed: rc.failed[origOf[e.Ticket]]}})
			case core.EfStartLoad, core.EfStartClone, core.EfStartProbe, core.EfStartTeardown:
				rec := m.EffectRecord(ev.Now, e)
				kind := completionOf[rec.Ef]
				j := rc.nextJob(rec.Model, kind, used)
				done := core.Event{Kind: kind, Job: e.Job, Failed: j.failed, Capacity: j.capacity}
				if kind == core.EvLoadDone || kind == core.EvProbeDone {
					cfg := e.Config
					if cfg == nil {
						c := m.Config(e.Model)
						cfg = &c
					}
					if !j.failed && (j.capacity == 0 || w.Slots > 0) {
						// A backend that hosted what the trace asked of it
						// (or a job beyond the recorded ones) hosts what the
						// replay asks.
						done.Capacity = max(j.capacity, cfg.Slots)
					}
				}
				push(pending{at: ev.Now + j.dur, ev: done})
			}
		}
		m.Advance()
		if nd := m.NextDeadline(); nd > 0 {
			if nd = max(nd, ev.Now); tickAt == 0 || nd < tickAt {
				tickAt = nd
				push(pending{at: nd, ev: core.Event{Kind: core.EvTick}})
			}
		}
	}
	rep.Models = st.finish()
	return rep, nil
}

// writeRecords writes one event and its effects as trace lines.
func writeRecords(out io.Writer, m *core.Machine, ev *core.Event, tk core.Ticket, effs []core.Effect) error {
	recs := []core.Record{core.EventRecord(*ev, tk)}
	for _, e := range effs {
		recs = append(recs, m.EffectRecord(ev.Now, e))
	}
	for _, r := range recs {
		b, err := core.MarshalRecord(r)
		if err != nil {
			return fmt.Errorf("sim: what-if: %w", err)
		}
		if _, err := out.Write(b); err != nil {
			return fmt.Errorf("sim: what-if: %w", err)
		}
	}
	return nil
}
