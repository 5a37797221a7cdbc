package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// TraceDirEnv names the environment variable that makes test suites write
// one ndjson trace per runtime into a directory (see TraceFromEnv), for
// `make trace-check` to validate against the spec.
const TraceDirEnv = "SLUICE_TRACE_DIR"

// TraceFromEnv opens <$SLUICE_TRACE_DIR>/<name>.ndjson for Options.Trace and
// writes the machine options beside it as <name>.options.json, since a trace
// replays only under the options it ran with. It returns nil, nil when the
// variable is unset. name is sanitised into a file name; the caller closes
// the file after Shutdown.
func TraceFromEnv(name string, opts core.Options) (io.WriteCloser, error) {
	dir := os.Getenv(TraceDirEnv)
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("runtime: trace dir: %w", err)
	}
	base := filepath.Join(dir, sanitize(name))
	o, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("runtime: trace options: %w", err)
	}
	if err := os.WriteFile(base+".options.json", append(o, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("runtime: trace options: %w", err)
	}
	f, err := os.Create(base + ".ndjson")
	if err != nil {
		return nil, fmt.Errorf("runtime: trace: %w", err)
	}
	return f, nil
}

func sanitize(name string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			return c
		}
		return '_'
	}, name)
}

// subscriber is one Subscribe channel.
type subscriber struct {
	ch     chan core.Record
	closed bool
	life   bool // lifecycle records only (SubscribeLifecycle)
}

// Subscribe returns a channel that receives a record of every event and
// effect from now on, in the order the machine processed them, and a
// function that ends the subscription. Records are sent without blocking
// the scheduler: a subscriber more than buffer records behind is dropped
// and its channel closed. While any full subscriber (or the trace) exists,
// every request pays for its records: the admission fast path is off.
func (r *Runtime) Subscribe(buffer int) (<-chan core.Record, func()) {
	_, ch, cancel := r.subscribe(buffer, false, false)
	return ch, cancel
}

// SubscribeSnapshot is Subscribe that also returns a copy of the machine
// taken in the same critical section: the state the first record applies
// to. A subscriber that mirrors the machine can start late from it.
func (r *Runtime) SubscribeSnapshot(buffer int) (*core.Machine, <-chan core.Record, func()) {
	return r.subscribe(buffer, false, true)
}

// SubscribeLifecycle is Subscribe restricted to the records of backend
// steps: the effects StartLoad, StartClone, StartProbe and StartTeardown
// and the events LoadDone, CloneDone, ProbeDone and TeardownDone. It costs
// the request path nothing: admissions and releases that start no backend
// step build no record for it.
func (r *Runtime) SubscribeLifecycle(buffer int) (<-chan core.Record, func()) {
	_, ch, cancel := r.subscribe(buffer, true, false)
	return ch, cancel
}

func (r *Runtime) subscribe(buffer int, life, snapshot bool) (*core.Machine, <-chan core.Record, func()) {
	sub := &subscriber{ch: make(chan core.Record, max(buffer, 1)), life: life}
	var snap *core.Machine
	r.mu.Lock()
	r.subs = append(r.subs, sub)
	r.setObsLocked()
	if snapshot {
		snap = r.m.Clone()
	}
	r.mu.Unlock()
	return snap, sub.ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.dropLocked(sub)
	}
}

func (r *Runtime) dropLocked(sub *subscriber) {
	for i, s := range r.subs {
		if s == sub {
			r.subs = append(r.subs[:i], r.subs[i+1:]...)
			break
		}
	}
	if !sub.closed {
		sub.closed = true
		close(sub.ch)
	}
	r.setObsLocked()
}

// setObsLocked recomputes which records the machine's events must build.
func (r *Runtime) setObsLocked() {
	r.obs, r.obsLife = r.trace != nil, false
	for _, s := range r.subs {
		if s.life {
			r.obsLife = true
		} else {
			r.obs = true
		}
	}
}

// lifecycleEvent and lifecycleEffect say which records SubscribeLifecycle
// delivers.
func lifecycleEvent(k core.EventKind) bool {
	return k == core.EvLoadDone || k == core.EvCloneDone || k == core.EvProbeDone || k == core.EvTeardownDone
}

func lifecycleEffect(k core.EffectKind) bool {
	return k == core.EfStartLoad || k == core.EfStartClone || k == core.EfStartProbe || k == core.EfStartTeardown
}

// recordLocked writes the event and its effects to the trace buffer and the
// subscribers, in machine order. Without a full subscriber or trace it
// builds only the lifecycle records.
func (r *Runtime) recordLocked(now int64, ev *core.Event, tk core.Ticket, effs []core.Effect) {
	if !r.obs {
		if lifecycleEvent(ev.Kind) {
			r.emitLocked(core.EventRecord(*ev, tk), true)
		}
		for i := range effs {
			if lifecycleEffect(effs[i].Kind) {
				r.emitLocked(r.m.EffectRecord(now, effs[i]), true)
			}
		}
		return
	}
	r.emitLocked(core.EventRecord(*ev, tk), lifecycleEvent(ev.Kind))
	for i := range effs {
		r.emitLocked(r.m.EffectRecord(now, effs[i]), lifecycleEffect(effs[i].Kind))
	}
}

// emitLocked sends rec to the trace and the subscribers; life says whether
// it is a lifecycle record.
func (r *Runtime) emitLocked(rec core.Record, life bool) {
	if r.trace != nil {
		if line, err := core.MarshalRecord(rec); err == nil {
			r.tbuf = append(r.tbuf, line...)
		} else {
			r.log.Error("runtime: trace record", "err", err)
		}
	}
	for i := 0; i < len(r.subs); i++ {
		sub := r.subs[i]
		if sub.life && !life {
			continue
		}
		select {
		case sub.ch <- rec:
		default:
			r.log.Warn("runtime: dropping a slow subscriber")
			r.dropLocked(sub)
			i--
		}
	}
}

// flushTrace writes the buffered trace lines. tmu keeps writes in machine
// order; the scheduler lock is held only to swap buffers, never across the
// write.
func (r *Runtime) flushTrace() {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	r.mu.Lock()
	b := r.tbuf
	r.tbuf = r.tspare[:0]
	r.mu.Unlock()
	if len(b) > 0 {
		if _, err := r.trace.Write(b); err != nil {
			r.log.Error("runtime: trace write", "err", err)
		}
	}
	r.tspare = b[:0]
}
