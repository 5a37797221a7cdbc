package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// Runtime checks: cases (`runtime: NAME`) that drive core/runtime directly,
// in the runner's own process and without HTTP, as a frontend other than
// Sluice's HTTP server would (CONTRACT.md time.custom-listener). They run
// in every mode of the runner, since they need no server: against
// --target they check the runtime linked into the runner. Like a step, every
// wait is bounded by the step timeout and nothing sleeps to reach a state.

// runtimeChecks maps a case's `runtime` name to its check.
var runtimeChecks = map[string]func(ctx context.Context, rr *runtimeRun) error{
	"custom-listener":  checkCustomListener,
	"decode-cancel":    checkDecodeCancel,
	"engine-cancel":    checkEngineCancel,
	"engine-cost":      checkEngineCost,
	"engine-history":   checkEngineHistory,
	"engine-load":      checkEngineLoadSafety,
	"engine-memory":    checkEngineMemory,
	"sherpa-malformed": checkSherpaMalformed,
	"sherpa-matched":   checkSherpaMatched,
	"sherpa-cancel":    checkSherpaCancel,
	"sherpa-language":  checkSherpaLanguage,
	"sherpa-hotwords":  checkSherpaHotwords,
	"whisper-cancel":   checkWhisperCancel,
	"whisper-corrupt":  checkWhisperCorrupt,
	"whisper-matched":  checkWhisperMatched,
	"whisper-vad":      checkWhisperVAD,
}

func runtimeCheckNames() []string { return slices.Sorted(maps.Keys(runtimeChecks)) }

// runtimeRun is one run of a runtime check.
type runtimeRun struct {
	tag        string // unique to the run and the case: model IDs, gate names, the goroutine label
	timeout    time.Duration
	modelsRoot string // the real engines' models root ("" when there is none)
}

// goroutineLabel is the pprof label every goroutine of a runtime check
// carries: the check's own and, inherited, every goroutine the runtime
// starts for it, so the check can tell them from the rest of the process.
const goroutineLabel = "sluice-conformance-case"

// runRuntimeCheck runs c's runtime check under its goroutine label.
func runRuntimeCheck(c *Case, o Options, tag string) error {
	rr := &runtimeRun{tag: fmt.Sprintf("c%d.%s", c.index, tag), timeout: o.StepTimeout, modelsRoot: o.ModelsRoot}
	var err error
	pprof.Do(context.Background(), pprof.Labels(goroutineLabel, rr.tag), func(ctx context.Context) {
		err = runtimeChecks[c.Runtime](ctx, rr)
	})
	return err
}

// await waits for ch or fails after the step timeout.
func (rr *runtimeRun) await(what string, ch <-chan struct{}) error {
	t := time.NewTimer(rr.timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return fmt.Errorf("timed out after %s waiting for %s", rr.timeout, what)
	}
}

// cancelled cancels a call through cancel and waits for its result on
// ended; it fails unless the call ended as a cancellation (code cancelled,
// wrapping context.Canceled). what names the call.
func (rr *runtimeRun) cancelled(what string, cancel context.CancelFunc, ended <-chan error) error {
	cancel()
	finished := make(chan struct{})
	var err error
	go func() { err = <-ended; close(finished) }()
	if werr := rr.await("the cancelled "+what+" to end", finished); werr != nil {
		return werr
	}
	if runtime.CodeOf(err) != core.CodeCancelled || !errors.Is(err, context.Canceled) {
		return fmt.Errorf("the cancelled %s ended with %v (code %v), want a cancellation", what, err, runtime.CodeOf(err))
	}
	return nil
}

// labelled returns the stacks of the live goroutines that carry the run's
// label and have a frame in a package whose path contains pkg.
func (rr *runtimeRun) labelled(pkg string) []string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	mark := fmt.Sprintf("%q:%q", goroutineLabel, rr.tag)
	var out []string
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(rec, mark) && strings.Contains(rec, pkg) {
			out = append(out, rec)
		}
	}
	return out
}

// frontend is a minimal caller other than the HTTP server: its own
// listener goroutine takes requests from a channel and runs each on a
// goroutine of its own. Stopping it is its owner's business, not the
// runtime's.
type frontend struct {
	rt    *runtime.Runtime
	reqs  chan frontReq
	stop  chan struct{}
	done  chan struct{} // the listener returned
	calls sync.WaitGroup
}

type frontReq struct {
	model, input string
	out          chan error
}

func startFrontend(rt *runtime.Runtime) *frontend {
	f := &frontend{rt: rt, reqs: make(chan frontReq), stop: make(chan struct{}), done: make(chan struct{})}
	go f.listen()
	return f
}

func (f *frontend) listen() {
	defer close(f.done)
	for {
		select {
		case q := <-f.reqs:
			f.calls.Go(func() {
				_, err := f.rt.Infer(context.Background(), q.model, backends.Request{Input: json.RawMessage(q.input)}, runtime.InferOptions{})
				q.out <- err
			})
		case <-f.stop:
			return
		}
	}
}

// infer hands one request to the frontend and returns where its outcome
// arrives.
func (f *frontend) infer(model, input string) <-chan error {
	out := make(chan error, 1)
	f.reqs <- frontReq{model: model, input: input, out: out}
	return out
}

// checkCustomListener: a frontend drives the runtime; Shutdown lets the
// admitted work finish, refuses every later call with shutting_down (while
// it runs and after it returned), and joins only the runtime's own
// goroutines: the frontend's listener runs on until its owner stops it, and
// nothing the runtime started is left.
func checkCustomListener(ctx context.Context, rr *runtimeRun) (err error) {
	fx := fixture.New()
	gates := fx.Gates()
	gate, teardown := "g."+rr.tag, "t."+rr.tag
	rt, err := runtime.New(runtime.Options{
		Core:    core.Options{IdleTimeout: int64(time.Hour)}, // the idle timer is one of the runtime's goroutines
		Engines: backends.Registry{fixture.Name: fx}, CheckInvariants: os.Getenv(runtime.MutantsEnv) == ""})
	if err != nil {
		return err
	}
	front := startFrontend(rt)
	var shutErr error
	shutDone := make(chan struct{})
	var shutOnce sync.Once
	shutdown := func() {
		shutOnce.Do(func() {
			go func() {
				sctx, cancel := context.WithTimeout(context.Background(), 4*rr.timeout)
				defer cancel()
				shutErr = rt.Shutdown(sctx)
				close(shutDone)
			}()
		})
	}
	var lease *runtime.Lease
	defer func() { // whatever happened, leave nothing behind
		if lease != nil {
			lease.Release(false) // only the first Release counts
		}
		gates.Open(gate)
		gates.Open(teardown)
		shutdown()
		if werr := rr.await("the runtime's shutdown", shutDone); werr != nil && err == nil {
			err = werr
		}
		front.calls.Wait()
		select {
		case <-front.done:
		default:
			close(front.stop)
			<-front.done
		}
	}()

	id := "m." + rr.tag
	spec := runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 2,
		Options: json.RawMessage(fmt.Sprintf(`{"gates":{"teardown":%q}}`, teardown))}
	if _, err := rt.Apply(ctx, id, spec); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	// Admitted work at the start of the shutdown: a frontend request held
	// at a gate, and a lease the frontend holds for a deferred answer.
	running := front.infer(id, fmt.Sprintf(`{"gate":%q}`, gate))
	wctx, cancel := context.WithTimeout(ctx, rr.timeout)
	defer cancel()
	if err := gates.AwaitWaiting(wctx, gate, 1); err != nil {
		return err
	}
	if lease, err = rt.Acquire(ctx, id, nil); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}

	shutdown()
	if err := rr.await("the shutdown to begin", rt.Stopping()); err != nil {
		return err
	}
	if err := refusesEverything(ctx, rt, front, id, "while shutting down"); err != nil {
		return err
	}
	pending := func(what string) error {
		select {
		case <-shutDone:
			return fmt.Errorf("Shutdown returned (%v) while %s", shutErr, what)
		default:
			return nil
		}
	}
	if err := pending("a lease was held and a request ran"); err != nil {
		return err
	}
	// The admitted work finishes; then the pool is torn down (held at the
	// teardown gate) and Shutdown waits for that too.
	lease.Release(false)
	gates.Open(gate)
	select {
	case err := <-running:
		if err != nil {
			return fmt.Errorf("the admitted request: %w", err)
		}
	case <-wctx.Done():
		return errors.New("the admitted request did not finish")
	}
	if err := gates.AwaitWaiting(wctx, teardown, 1); err != nil {
		return fmt.Errorf("the shutdown's teardown: %w", err)
	}
	if err := pending("the pool's teardown ran"); err != nil {
		return err
	}
	gates.Open(teardown)
	if err := rr.await("Shutdown to return", shutDone); err != nil {
		return err
	}
	if shutErr != nil {
		return fmt.Errorf("Shutdown: %w", shutErr)
	}
	if err := refusesEverything(ctx, rt, front, id, "after Shutdown returned"); err != nil {
		return err
	}
	// Only the runtime's own goroutines were joined: the frontend's
	// listener still runs; once the frontend's own calls have returned,
	// no goroutine of this check is left in the runtime's code.
	select {
	case <-front.done:
		return errors.New("the runtime's shutdown stopped the frontend's own listener")
	default:
	}
	front.calls.Wait()
	deadline := time.Now().Add(rr.timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		left := rr.labelled("sluice/core/runtime.")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines of the runtime left after Shutdown returned:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		t := time.NewTimer(wait) // polls what it observes; it never decides an ordering
		<-t.C
	}
	if len(rr.labelled("conformance.(*frontend).listen")) != 1 {
		return errors.New("the frontend's listener goroutine is not running")
	}
	if n := fx.OpenSessions(); n != 0 {
		return fmt.Errorf("%d fixture sessions left open", n)
	}
	if v := fx.Violations(); len(v) > 0 {
		return fmt.Errorf("fixture session rules broken: %v", v)
	}
	return nil
}

// refusesEverything checks that every call, through the frontend and
// directly, is refused with shutting_down.
func refusesEverything(ctx context.Context, rt *runtime.Runtime, front *frontend, id, when string) error {
	spec := runtime.ModelSpec{Engine: fixture.Name, Task: "tts", Slots: 1}
	calls := []struct {
		name string
		do   func() error
	}{
		{"a frontend request", func() error { return <-front.infer(id, `{}`) }},
		{"Infer", func() error {
			_, err := rt.Infer(ctx, id, backends.Request{Input: json.RawMessage(`{}`)}, runtime.InferOptions{})
			return err
		}},
		{"Infer of an unknown model", func() error {
			_, err := rt.Infer(ctx, "ghost."+id, backends.Request{}, runtime.InferOptions{})
			return err
		}},
		{"Acquire", func() error {
			l, err := rt.Acquire(ctx, id, nil)
			if l != nil {
				l.Release(false)
			}
			return err
		}},
		{"Apply (reconfigure)", func() error { _, err := rt.Apply(ctx, id, spec); return err }},
		{"Apply (register)", func() error { _, err := rt.Apply(ctx, "new."+id, spec); return err }},
		{"Load", func() error { _, err := rt.Load(ctx, id); return err }},
		{"Unload", func() error { _, err := rt.Unload(ctx, id); return err }},
		{"BulkUnload", func() error { _, err := rt.BulkUnload(ctx, []string{id}); return err }},
	}
	for _, c := range calls {
		if err := c.do(); !errors.Is(err, runtime.ErrShuttingDown) {
			return fmt.Errorf("%s %s: %v, want shutting_down", c.name, when, err)
		}
	}
	return nil
}
