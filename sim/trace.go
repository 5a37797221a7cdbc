package sim

import (
	"bufio"
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/core"
)

// traceWriter writes core's ndjson trace records (core.EventRecord,
// Machine.EffectRecord, core.MarshalRecord): the format the runtime writes
// and spec's trace validator reads.
type traceWriter struct {
	w   *bufio.Writer
	err error
}

func newTraceWriter(w io.Writer) *traceWriter { return &traceWriter{w: bufio.NewWriterSize(w, 64<<10)} }

func (t *traceWriter) line(r core.Record) {
	if t.err != nil {
		return
	}
	b, err := core.MarshalRecord(r)
	if err == nil {
		_, err = t.w.Write(b)
	}
	if err != nil {
		t.err = fmt.Errorf("sim: trace: %w", err)
	}
}

// event writes one applied event and the effects it emitted. Events that
// core refused (misuse probes; they change nothing) are not written: the
// trace holds only behaviour the validator should accept or reject.
func (t *traceWriter) event(m *core.Machine, ev *core.Event, tk core.Ticket, effs []core.Effect) {
	t.line(core.EventRecord(*ev, tk))
	for _, e := range effs {
		t.line(m.EffectRecord(ev.Now, e))
	}
}

func (t *traceWriter) flush() error {
	if t.err == nil {
		if err := t.w.Flush(); err != nil {
			t.err = fmt.Errorf("sim: trace: %w", err)
		}
	}
	return t.err
}

// apply applies one event to the machine by its named method. Cancel is
// called directly for its result; every other kind goes through Step.
func apply(m *core.Machine, ev *core.Event) (core.Ticket, bool, error) {
	if ev.Kind == core.EvCancel {
		ok, err := m.Cancel(ev.Now, ev.Ticket, ev.Reason)
		return 0, ok, err
	}
	tk, err := m.Step(*ev)
	return tk, false, err
}
