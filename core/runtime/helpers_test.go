package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one runtime over a fixture engine (and optionally more engines),
// shut down and checked when the test ends: every session closed, no
// session rule broken, no ticket or job left in the machine.
type env struct {
	t  testing.TB
	rt *Runtime
	fx *fixture.Engine
}

type envOpt func(*envConfig)

// envConfig is what newEnv builds a runtime from.
type envConfig struct {
	Options
	traceName string // trace file name under SLUICE_TRACE_DIR; default the test's name
}

// withTraceName names the trace file, for tests that make many runtimes.
func withTraceName(name string) envOpt { return func(c *envConfig) { c.traceName = name } }

func withEngine(name string, e backends.Engine) envOpt {
	return func(c *envConfig) { c.Engines[name] = e }
}

func withTrace(w io.Writer) envOpt { return func(c *envConfig) { c.Trace = w } }

// withoutChecks turns off the core's invariant checks and the fixture's
// cleanup checks, for runs with planted bugs.
func withoutChecks() envOpt { return func(c *envConfig) { c.CheckInvariants = false } }

// withLive turns the live (sampled) invariant checks on, every n client events.
func withLive(n int) envOpt { return func(c *envConfig) { c.LiveInvariants = n } }

func testLogger() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

func newEnv(t testing.TB, copts core.Options, extra ...envOpt) *env {
	t.Helper()
	fx := fixture.New()
	cfg := envConfig{Options: Options{Core: copts, Engines: backends.Registry{fixture.Name: fx}, CheckInvariants: true,
		Logger: testLogger()}, traceName: t.Name()}
	for _, f := range extra {
		f(&cfg)
	}
	opts := cfg.Options
	var traceFile io.Closer
	if opts.Trace == nil && copts.Mutants == 0 { // a run with planted bugs is no behaviour of the spec
		w, err := TraceFromEnv(cfg.traceName, copts)
		if err != nil {
			t.Fatal(err)
		}
		if w != nil {
			opts.Trace, traceFile = w, w
		}
	}
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, rt: rt, fx: fx}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if traceFile != nil {
			traceFile.Close()
		}
		if !opts.CheckInvariants {
			return
		}
		if n := fx.OpenSessions(); n != 0 {
			t.Errorf("%d fixture sessions still open after shutdown", n)
		}
		if v := fx.Violations(); len(v) > 0 {
			t.Errorf("session rules broken: %v", v)
		}
		rt.mu.Lock()
		live, jobs := rt.m.LiveTickets(), rt.m.JobsInFlight()
		rt.mu.Unlock()
		if live != 0 || jobs != 0 {
			t.Errorf("after shutdown: %d live tickets, %d jobs", live, jobs)
		}
	})
	return e
}

// spec is a fixture model spec with slots and options JSON.
func spec(slots int, opts string) ModelSpec {
	return ModelSpec{Engine: fixture.Name, Task: "tts", Checkpoint: "ck", Slots: slots, Options: json.RawMessage(opts)}
}

func (e *env) apply(id string, s ModelSpec) core.ModelStatus {
	e.t.Helper()
	st, err := e.rt.Apply(context.Background(), id, s)
	if err != nil {
		e.t.Fatalf("apply %s: %v", id, err)
	}
	return st
}

func (e *env) status(id string) core.ModelStatus {
	e.t.Helper()
	st, err := e.rt.StatusOf(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// fixtureOut is the fixture's output object.
type fixtureOut struct {
	Model         string `json:"model"`
	ConfigVersion uint64 `json:"config_version"`
	Slot          int    `json:"slot"`
	Session       string `json:"session"`
	Chunk         *int   `json:"chunk"`
}

func decodeOut(t testing.TB, raw []byte) fixtureOut {
	t.Helper()
	var o fixtureOut
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("fixture output %q: %v", raw, err)
	}
	return o
}

// call is an operation running on its own goroutine.
type call[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func start[T any](f func() (T, error)) *call[T] {
	c := &call[T]{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.val, c.err = f()
	}()
	return c
}

func (c *call[T]) wait() (T, error) {
	<-c.done
	return c.val, c.err
}

func (c *call[T]) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (e *env) infer(ctx context.Context, id string, input string, o InferOptions) *call[Result] {
	return start(func() (Result, error) {
		return e.rt.Infer(ctx, id, backends.Request{Input: json.RawMessage(input)}, o)
	})
}

func dur(d time.Duration) *time.Duration { return &d }

// recorder collects the records of a Subscribe channel.
type recorder struct {
	mu   sync.Mutex
	recs []core.Record
	done chan struct{}
}

func (e *env) record() (*recorder, func() []core.Record) {
	ch, stop := e.rt.Subscribe(1 << 16)
	rc := &recorder{done: make(chan struct{})}
	go func() {
		defer close(rc.done)
		for r := range ch {
			rc.mu.Lock()
			rc.recs = append(rc.recs, r)
			rc.mu.Unlock()
		}
	}()
	return rc, func() []core.Record {
		stop()
		<-rc.done
		return rc.recs
	}
}

func describe(recs []core.Record) string {
	var b strings.Builder
	for _, r := range recs {
		if r.Ev != "" {
			fmt.Fprintf(&b, "ev %s %s\n", r.Ev, r.Model)
		} else {
			fmt.Fprintf(&b, "  ef %s %s %s\n", r.Ef, r.Model, r.Code)
		}
	}
	return b.String()
}

// fakeTime lets d of fake time pass inside a testing/synctest bubble: the
// bubble's goroutines run until all of them block, then its clock jumps.
// Every caller runs inside synctest.Test, so it never waits in real time and
// no ordering depends on it; it exists so that fake-time steps read as such.
func fakeTime(d time.Duration) { <-time.After(d) }
