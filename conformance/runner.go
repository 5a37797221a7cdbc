package conformance

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sync"
	"time"
)

// Options configure a run of the suite.
type Options struct {
	// Target is the base URL of the server that runs every case without
	// its own; empty: Launcher starts one (parallel runtime, management,
	// fixture) for the run.
	Target string
	// Launcher starts the servers of cases that need their own (and the
	// shared one when Target is empty). Nil: an InProcess without a
	// Build, which cannot start any (conformance/inproc wires one in).
	Launcher Launcher
	// Binary starts the servers of cases that need a real process (signal
	// handling); nil skips those cases.
	Binary Launcher
	// Run selects cases whose name or one of whose cells matches; nil runs
	// every case.
	Run *regexp.Regexp
	// Parallel is how many cases run at once (default 8).
	Parallel int
	// StepTimeout bounds every wait of a step (default 15 s).
	StepTimeout time.Duration
	// Slack multiplies every time bound a case states (within_ms,
	// exited.max_ms); default 1. Loaded machines and -race may need more.
	Slack float64
	// Progress, when set, receives one line per finished case.
	Progress io.Writer
	// ModelsRoot is the real engines' models root for cases whose server
	// serves them (server.engines); empty skips those cases.
	ModelsRoot string

	_ struct{}
}

func (o *Options) defaults() {
	if o.Launcher == nil {
		o.Launcher = InProcess{}
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 15 * time.Second
	}
	if o.Slack <= 0 {
		o.Slack = 1
	}
}

// Verdicts of a case.
const (
	Pass = "pass"
	Fail = "FAIL"
	Skip = "skip"
)

// Result is the outcome of one case.
type Result struct {
	Case     string        `json:"case"`
	Matrix   string        `json:"matrix"`
	Covers   []string      `json:"covers,omitempty"`
	Partial  []string      `json:"partial,omitempty"`
	Verdict  string        `json:"verdict"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	Server   string        `json:"server"` // shared, in-process or binary
}

// Report is the outcome of a run.
type Report struct {
	Target   string        `json:"target"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Results  []Result      `json:"results"`
	Lin      *LinReport    `json:"linearizability,omitempty"`
}

// Failed returns the failed results.
func (r *Report) Failed() []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Verdict == Fail {
			out = append(out, x)
		}
	}
	return out
}

// OK reports whether nothing failed.
func (r *Report) OK() bool { return len(r.Failed()) == 0 && (r.Lin == nil || r.Lin.OK()) }

// Select returns the cases re selects (nil: all).
func (s *Suite) Select(re *regexp.Regexp) []*Case {
	var out []*Case
	for _, c := range s.Cases {
		if re == nil || re.MatchString(c.Name) {
			out = append(out, c)
			continue
		}
		for _, id := range c.Cells() {
			if re.MatchString(id) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// NewRunTag returns a short random tag that makes the model IDs and gate
// names of one run unique on a server that has seen other runs.
func NewRunTag() string {
	const digits = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = digits[int(b[i])%len(digits)]
	}
	return string(b)
}

// RunCase runs one case: on its own server when it has one, else on the
// server at shared. tag is the run's tag (NewRunTag).
func RunCase(c *Case, o Options, shared, tag string) (res Result) {
	o.defaults()
	res = Result{Case: c.Name, Matrix: c.Matrix(), Covers: c.Covers, Partial: c.Partial, Server: "shared"}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	defer func() {
		if v := recover(); v != nil {
			res.Verdict, res.Error = Fail, fmt.Sprintf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	if c.Runtime != "" {
		res.Server = "runtime"
		if err := runRuntimeCheck(c, o, tag); err != nil {
			res.Verdict, res.Error = Fail, err.Error()
			if errors.Is(err, errUnavailable) { // a real engine or the models root is missing
				res.Verdict = Skip
			}
			return res
		}
		res.Verdict = Pass
		return res
	}
	base := shared
	var inst Instance
	var restart func() (Instance, error)
	var spec ServerSpec
	if c.Server != nil {
		l := o.Launcher
		if c.NeedsBinary() {
			if o.Binary == nil {
				res.Verdict, res.Error = Skip, "needs a server binary (--binary PATH)"
				return res
			}
			l = o.Binary
		}
		if c.UsesHandler() && l.Kind() != "in-process" {
			res.Verdict, res.Error = Skip, "needs an in-process server (a step goes to its handler)"
			return res
		}
		spec = *c.Server
		spec.trace = c.readsTrace()
		if dir := os.Getenv(TraceKeepEnv); dir != "" {
			spec.trace, spec.keepTrace = true, filepath.Join(dir, c.Name+".ndjson")
		}
		if len(spec.Engines) > 0 {
			spec.modelsRoot = o.ModelsRoot
			if err := checkModelsRoot(spec.modelsRoot); err != nil {
				res.Verdict, res.Error = Skip, err.Error()
				return res
			}
		}
		if c.TouchesFiles() && o.Target != "" && l.Kind() != "binary" {
			// Against --target, a server the runner starts in process is
			// the runner's own build, not the target's: what a build does
			// with its files is checked on the build itself (--binary).
			res.Verdict, res.Error = Skip, "acts on its server's state dir: needs the build as a binary (--binary PATH)"
			return res
		}
		if spec.StateDir {
			dir, err := os.MkdirTemp("", "sluice-conformance-state-")
			if err != nil {
				res.Verdict, res.Error = Fail, err.Error()
				return res
			}
			defer os.RemoveAll(dir)
			spec.caseDir, spec.stateDir = dir, filepath.Join(dir, "state")
			if spec.SpoolDir {
				spec.spoolDir = filepath.Join(dir, "spool")
				if err := os.Mkdir(spec.spoolDir, 0o700); err != nil {
					res.Verdict, res.Error = Fail, err.Error()
					return res
				}
			}
		}
		spec.Startup = mapStartup(spec.Startup, fmt.Sprintf("c%d.%s", c.index, tag))
		restart = func() (Instance, error) { return l.Start(spec) }
		var err error
		if inst, err = l.Start(spec); err != nil {
			res.Verdict, res.Error = Fail, err.Error()
			if errors.Is(err, errUnavailable) {
				res.Verdict = Skip
			}
			return res
		}
		base, res.Server = inst.URL(), l.Kind()
	}
	cr := newCaseRun(c, base, inst, fmt.Sprintf("c%d.%s", c.index, tag), o.StepTimeout, o.Slack)
	cr.restart, cr.caseDir = restart, spec.caseDir
	err := cr.run()
	cr.finish()
	err = errors.Join(err, cr.finishErr)
	inst = cr.inst // a restart or start step replaced the first one
	if inst != nil {
		if cerr := inst.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("own server: %w", cerr))
		}
		if err != nil {
			err = fmt.Errorf("%w\nserver log:\n%s", err, lastLines(inst.Logs(), 40))
		}
	} else if err != nil && cr.lastLogs != "" {
		err = fmt.Errorf("%w\nlog of the server stopped last:\n%s", err, lastLines(cr.lastLogs, 40))
	}
	if err != nil {
		res.Verdict, res.Error = Fail, err.Error()
		return res
	}
	res.Verdict = Pass
	return res
}

// Run runs the selected cases, o.Parallel at a time, and returns their
// results in suite order.
func (s *Suite) Run(o Options) (Report, error) {
	o.defaults()
	rep := Report{Target: o.Target, Started: time.Now()}
	shared := o.Target
	if shared == "" {
		inst, err := o.Launcher.Start(ServerSpec{})
		if err != nil {
			return rep, err
		}
		defer func() { _ = inst.Close() }()
		shared = inst.URL()
		rep.Target = shared + " (" + o.Launcher.Kind() + ", started by the runner)"
	}
	cases := s.Select(o.Run)
	tag := NewRunTag()
	rep.Results = make([]Result, len(cases))
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range o.Parallel {
		wg.Go(func() {
			for i := range work {
				r := RunCase(cases[i], o, shared, tag)
				mu.Lock()
				rep.Results[i] = r
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "%-4s %-55s %6dms\n", r.Verdict, r.Case, r.Duration.Milliseconds())
				}
				mu.Unlock()
			}
		})
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()
	rep.Duration = time.Since(rep.Started)
	return rep, nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	k := len(s)
	for i := 0; i < n && k > 0; i++ {
		j := k - 1
		for j > 0 && s[j-1] != '\n' {
			j--
		}
		k = j
	}
	return s[k:]
}

// mapStartup maps the model symbols of a server's startup config to the
// case's model names, as caseRun.model does.
func mapStartup(models []map[string]any, tag string) []map[string]any {
	out := make([]map[string]any, len(models))
	for i, m := range models {
		c := maps.Clone(m)
		if id, ok := c["id"].(string); ok {
			c["id"] = id + "." + tag
		}
		out[i] = c
	}
	return out
}
