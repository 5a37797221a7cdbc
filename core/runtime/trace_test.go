package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// replayTrace replays an ndjson trace into a fresh machine and checks that
// every submission gets the recorded ticket and every event produces exactly
// the recorded effects, in order. It returns the number of lines.
func replayTrace(t testing.TB, opts core.Options, trace []byte) int {
	t.Helper()
	m, err := core.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var pending [][]byte // effects the last event produced, not yet matched
	var now int64
	lines := 0
	check := func() {
		if len(pending) > 0 {
			t.Fatalf("line %d: replay produced effects the trace lacks: %s", lines, pending[0])
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(trace))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines++
		line := append(sc.Bytes(), '\n')
		var rec core.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		if rec.Ef != "" {
			if len(pending) == 0 || !bytes.Equal(pending[0], line) {
				t.Fatalf("line %d: trace has effect %s, replay has %q", lines, line, pending)
			}
			pending = pending[1:]
			continue
		}
		check()
		if rec.T < now {
			t.Fatalf("line %d: time went back from %d to %d", lines, now, rec.T)
		}
		now = rec.T
		ev, err := rec.Event()
		if err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		tk, err := m.Step(ev)
		if err != nil {
			t.Fatalf("line %d: replay refused %s: %v", lines, line, err)
		}
		if (ev.Kind == core.EvSubmitRequest || ev.Kind == core.EvSubmitManager || ev.Kind == core.EvSubmitBulkUnload) &&
			uint64(tk) != rec.Ticket {
			t.Fatalf("line %d: ticket %d, trace says %d", lines, tk, rec.Ticket)
		}
		for _, e := range m.Effects() {
			b, err := core.MarshalRecord(m.EffectRecord(rec.T, e))
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, b)
		}
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		m.Advance()
	}
	check()
	return lines
}

// The trace is every event and effect in machine order: replaying its
// events into a fresh machine reproduces its tickets and effects exactly.
func TestTraceReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := core.Options{IdleTimeout: int64(time.Second), MaxLoadedModels: 2}
		var buf lockedBuffer
		e := newEnv(t, opts, withTrace(&buf))
		e.apply("a", spec(2, `{"load_ms":3,"clone_ms":1}`))
		e.apply("b", spec(1, `{}`))
		var calls []*call[Result]
		for range 5 {
			calls = append(calls, e.infer(bg, "a", `{"infer_ms":2}`, InferOptions{}))
		}
		synctest.Wait()
		calls = append(calls, e.infer(bg, "a", `{}`, InferOptions{Timeout: dur(time.Millisecond)})) // times out queued
		synctest.Wait()
		ctx, cancel := context.WithCancel(bg)
		calls = append(calls, e.infer(ctx, "a", `{}`, InferOptions{}))
		synctest.Wait()
		re := start(func() (core.ModelStatus, error) { return e.rt.Apply(bg, "a", spec(3, `{"fail_clone_at":2}`)) })
		synctest.Wait()
		cancel()
		for _, c := range calls {
			c.wait()
		}
		if _, err := re.wait(); !errors.Is(err, ErrBackend) {
			t.Fatalf("apply with a failing clone: %v", err)
		}
		e.apply("a", spec(2, `{}`))
		e.apply("c", spec(1, `{"teardown_ms":5}`)) // evicts b
		e.rt.Infer(bg, "nope", backends.Request{}, InferOptions{})
		e.rt.BulkUnload(bg, []string{"c", "x"})
		fakeTime(2 * time.Second) // idle retirement of a
		synctest.Wait()
		if err := e.rt.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		trace := buf.Bytes()
		n := replayTrace(t, opts, trace)
		if n < 50 || !bytes.HasSuffix(trace, []byte(`{"ef":"ShutdownComplete","t":`+string(lastT(trace))+"}\n")) {
			t.Fatalf("%d lines, ending %q", n, trace[max(0, len(trace)-80):])
		}
		for _, want := range []string{`"cause":"evict"`, `"cause":"idle"`, `"cause":"failed_load"`, `"reason":"disconnect"`,
			`"code":"server_busy"`, `"code":"not_found"`, `"ev":"SubmitBulkUnload"`, `"ev":"Tick"`} {
			if !bytes.Contains(trace, []byte(want)) {
				t.Errorf("trace lacks %s", want)
			}
		}
	})
}

func lastT(trace []byte) []byte {
	i := bytes.LastIndex(trace, []byte(`"t":`))
	j := bytes.IndexByte(trace[i:], '}')
	return trace[i+4 : i+j]
}

// The hot path (a warm model with a spare slot, nothing queued) allocates
// nothing with the trace off.
func TestHotPathAllocs(t *testing.T) {
	fx := fixture.New()
	rt, err := New(Options{Engines: backends.Registry{fixture.Name: fx}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(bg)
	if _, err := rt.Apply(bg, "a", spec(4, `{}`)); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(1000, func() {
		g, _, err := rt.acquire(bg, "a", core.NoTimeout, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		rt.release(g.tk, false)
	})
	if n != 0 {
		t.Fatalf("%v allocations per submit, grant and release", n)
	}
}
