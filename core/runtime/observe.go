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
}

// Subscribe returns a channel that receives a record of every event and
// effect from now on, in the order the machine processed them, and a
// function that ends the subscription. Records are sent without blocking
// the scheduler: a subscriber more than buffer records behind is dropped
// and its channel closed.
func (r *Runtime) Subscribe(buffer int) (<-chan core.Record, func()) {
	sub := &subscriber{ch: make(chan core.Record, max(buffer, 1))}
	r.mu.Lock()
	r.subs = append(r.subs, sub)
	r.obs = true
	r.mu.Unlock()
	return sub.ch, func() {
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
	r.obs = r.trace != nil || len(r.subs) > 0
}

// recordLocked writes the event and its effects to the trace buffer and the
// subscribers, in machine order.
func (r *Runtime) recordLocked(now int64, ev *core.Event, tk core.Ticket, effs []core.Effect) {
	r.emitLocked(core.EventRecord(*ev, tk))
	for i := range effs {
		r.emitLocked(r.m.EffectRecord(now, effs[i]))
	}
}

func (r *Runtime) emitLocked(rec core.Record) {
	if r.trace != nil {
		if line, err := core.MarshalRecord(rec); err == nil {
			r.tbuf = append(r.tbuf, line...)
		} else {
			r.log.Error("runtime: trace record", "err", err)
		}
	}
	for i := 0; i < len(r.subs); i++ {
		sub := r.subs[i]
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
