package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/internal/listenlog"
)

// Instance is a server the runner started for a case (or the shared one).
type Instance interface {
	// URL is the base URL, http://127.0.0.1:PORT.
	URL() string
	// Handler is the in-process server's handler (nil for a binary): it
	// answers like the listener even after the listener has closed.
	Handler() http.Handler
	// Shutdown begins the shutdown as the first SIGINT/SIGTERM would.
	Shutdown(sig string) error
	// Signal sends a later signal: a binary gets it; in-process it is a
	// second Shutdown call, which must change nothing.
	Signal(sig string) error
	// Done is closed when the server has exited; ExitErr is then its
	// error (Shutdown's result, or the process's exit status).
	Done() <-chan struct{}
	ExitErr() error
	// ShutdownBegan is when Shutdown was called (zero before).
	ShutdownBegan() time.Time
	// Logs returns everything the server logged so far.
	Logs() string
	// OpenSessions reports the fixture's open sessions (in-process only).
	OpenSessions() (int, bool)
	// TracePath is the scheduler trace the server writes (ndjson
	// core.Records), or "" when the case did not ask for one.
	TracePath() string
	// Close stops the server if it still runs and reports what it left
	// behind (fixture sessions, broken session rules, a failed exit).
	Close() error
}

// Launcher starts servers for cases that need their own.
type Launcher interface {
	Start(spec ServerSpec) (Instance, error)
	// Kind is "in-process" or "binary".
	Kind() string
}

// defaultShutdownTimeout is the --shutdown-timeout of servers whose spec
// sets none: long enough never to matter in a passing case.
const defaultShutdownTimeout = 10 * time.Second

func (sp *ServerSpec) shutdownTimeout() time.Duration {
	switch {
	case sp.ShutdownTimeoutMS < 0:
		return 0
	case sp.ShutdownTimeoutMS == 0:
		return defaultShutdownTimeout
	}
	return time.Duration(sp.ShutdownTimeoutMS) * time.Millisecond
}

// tracePath is where a server whose files live in root writes its trace:
// in the case's folder when it has one (kept across restarts, so the next
// start finds the earlier run's trace), else in root.
func (sp *ServerSpec) tracePath(root string) string {
	if !sp.trace && !sp.Trace {
		return ""
	}
	if sp.caseDir != "" {
		return filepath.Join(sp.caseDir, "trace.ndjson")
	}
	return filepath.Join(root, "trace.ndjson")
}

// modelsRootIn is the server's --models-root: the real engines' root for
// a case that needs them, else the (empty) folder root.
func (sp *ServerSpec) modelsRootIn(root string) string {
	if len(sp.Engines) > 0 {
		return sp.modelsRoot
	}
	return root
}

// flags returns the `sluice serve` flags of spec, with its files in root.
func (sp *ServerSpec) flags(root, configFile string) []string {
	a := []string{"serve", "--listen", "127.0.0.1:0", "--models-root", sp.modelsRootIn(root), "--config", configFile,
		"--shutdown-timeout", sp.shutdownTimeout().String()}
	if p := sp.tracePath(root); p != "" {
		a = append(a, "--trace", p)
	}
	if sp.stateDir != "" {
		a = append(a, "--state-dir", sp.stateDir)
	}
	if sp.spoolDir != "" {
		a = append(a, "--spool-dir", sp.spoolDir)
	}
	on := func(b bool, flag string) {
		if b {
			a = append(a, flag)
		}
	}
	on(boolOr(sp.ParallelJobs, true), "--parallel-jobs")
	on(boolOr(sp.UIManagement, true), "--ui-management")
	on(boolOr(sp.Fixture, true), "--fixture")
	on(sp.SerializeColdLoads, "--serialize-cold-loads")
	if sp.APIKey != "" {
		a = append(a, "--api-key", sp.APIKey)
	}
	if sp.ManagementKey != "" {
		a = append(a, "--management-key", sp.ManagementKey)
	}
	if sp.SignInLimit > 0 {
		a = append(a, "--sign-in-limit", strconv.Itoa(sp.SignInLimit))
	}
	if sp.MaxLoadedModels > 0 {
		a = append(a, "--max-loaded-models", strconv.Itoa(sp.MaxLoadedModels))
	}
	if sp.MemoryBudgetMB > 0 {
		a = append(a, "--memory-budget", strconv.FormatInt(sp.MemoryBudgetMB, 10))
	}
	ms := func(v int64, flag string) {
		if v > 0 {
			a = append(a, flag, (time.Duration(v) * time.Millisecond).String())
		}
	}
	ms(sp.IdleTimeoutMS, "--idle-timeout")
	ms(sp.AdmissionTimeoutMS, "--admission-timeout")
	ms(sp.AdmissionCeilingMS, "--admission-ceiling")
	ms(sp.LoadBackoffMS, "--load-backoff")
	ms(sp.LoadBackoffMaxMS, "--load-backoff-max")
	if sp.LoadBackoffMS < 0 {
		a = append(a, "--load-backoff", "0s")
	}
	if sp.MaxBody > 0 {
		a = append(a, "--max-body", strconv.FormatInt(sp.MaxBody, 10))
	}
	if sp.MaxModels != nil {
		a = append(a, "--max-models", strconv.Itoa(*sp.MaxModels))
	}
	if len(sp.AllowedHosts) > 0 {
		a = append(a, "--allowed-hosts", strings.Join(sp.AllowedHosts, ","))
	}
	if len(sp.AllowedOrigins) > 0 {
		a = append(a, "--allowed-origins", strings.Join(sp.AllowedOrigins, ","))
	}
	ms(sp.ReadHeaderTimeoutMS, "--read-header-timeout")
	ms(sp.IdleConnTimeoutMS, "--idle-conn-timeout")
	ms(sp.WriteTimeoutMS, "--write-timeout")
	ms(sp.RealtimeDrainMS, "--realtime-drain")
	ms(sp.RealtimeIdleMS, "--realtime-idle")
	ms(sp.BodyReadTimeoutMS, "--body-read-timeout")
	ms(sp.BodyRateGraceMS, "--body-rate-grace")
	for _, v := range []struct {
		n    int64
		flag string
	}{{sp.MinBodyRate, "--min-body-rate"}, {sp.MaxJSONBody, "--max-json-body"}, {sp.SpoolThreshold, "--spool-threshold"},
		{sp.BodyBudget, "--body-budget"}, {sp.SpoolBudget, "--spool-budget"}, {int64(sp.MaxConns), "--max-conns"}} {
		if v.n > 0 {
			a = append(a, v.flag, strconv.FormatInt(v.n, 10))
		}
	}
	return a
}

// startupConfig is the server's --config file: its Startup models (JSON,
// which YAML reads), engine fixture and one slot unless given.
func (sp *ServerSpec) startupConfig() ([]byte, error) {
	models := make([]map[string]any, len(sp.Startup))
	for i, m := range sp.Startup {
		e := map[string]any{"engine": "fixture", "slots": 1}
		maps.Copy(e, m)
		models[i] = e
	}
	b, err := json.Marshal(map[string]any{"models": models})
	if err != nil {
		return nil, fmt.Errorf("conformance: startup models: %w", err)
	}
	return b, nil
}

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// InProcess starts servers inside this process, listening on 127.0.0.1,
// through Build: conformance/inproc builds package server's, which this
// package does not import (the suite's core runs against any server, a
// binary or a URL alike). Environment variables such as SLUICE_MUTANTS
// apply as in any build (runtime.New reads them).
type InProcess struct {
	// CheckInvariants makes the runtime check the core's invariants after
	// every event and panic on a violation (tests; never with mutants).
	CheckInvariants bool
	// Build builds each server (conformance/inproc.Build); nil: Start
	// fails.
	Build Builder

	_ struct{}
}

// A Builder builds one in-process server as `sluice serve` would before
// it listens: its state dir restored, then its startup models
// registered.
type Builder func(b Build) (Server, error)

// Build is one in-process server to build: its spec, with the files the
// runner gave it resolved.
type Build struct {
	Spec ServerSpec
	// ModelsRoot is --models-root, TraceFile --trace ("" none), StateDir
	// --state-dir ("" none), SpoolDir --spool-dir ("" the system's).
	ModelsRoot, TraceFile, StateDir, SpoolDir string
	// ShutdownTimeout is --shutdown-timeout (0: none).
	ShutdownTimeout time.Duration
	// Startup is the startup config (--config, YAML); nil: none.
	Startup []byte
	// Engines are the real engines the spec serves, besides the fixture.
	Engines backends.Registry
	// Log receives the server's log.
	Log *slog.Logger
	// CheckInvariants: the runtime checks the core's invariants after
	// every event (InProcess.CheckInvariants).
	CheckInvariants bool
}

// Server is a server built in process (package server's *Server).
type Server interface {
	// Run serves ln until ctx ends, then shuts down.
	Run(ctx context.Context, ln net.Listener) error
	// Handler is the server's HTTP handler.
	Handler() http.Handler
	// Shutdown shuts the server down; a second call waits for the first.
	Shutdown(ctx context.Context) error
	// Fixture is the fixture engine, nil without --fixture.
	Fixture() *fixture.Engine
}

// Kind returns "in-process".
func (InProcess) Kind() string { return "in-process" }

// Start builds and serves one server.
func (l InProcess) Start(spec ServerSpec) (Instance, error) {
	root, err := os.MkdirTemp("", "sluice-conformance-")
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if l.Build == nil {
		_ = os.RemoveAll(root)
		return nil, errors.New("conformance: InProcess has no Build (conformance/inproc.Build builds package server's)")
	}
	engines, err := realEngines(spec.Engines)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	b := Build{Spec: spec, ModelsRoot: spec.modelsRootIn(root), TraceFile: spec.tracePath(root), StateDir: spec.stateDir,
		SpoolDir:        spec.spoolDir,
		ShutdownTimeout: spec.shutdownTimeout(), Engines: engines, Log: log, CheckInvariants: l.CheckInvariants}
	if len(spec.Startup) > 0 {
		if b.Startup, err = spec.startupConfig(); err != nil {
			_ = os.RemoveAll(root)
			return nil, err
		}
	}
	s, err := l.Build(b)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("conformance: start server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = s.Shutdown(context.Background())
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("conformance: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &inproc{s: s, root: root, logs: logs, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan struct{}),
		bound: spec.shutdownTimeout() + 5*time.Second, trace: spec.tracePath(root), keep: spec.keepTrace}
	go func() {
		err := s.Run(ctx, ln)
		in.mu.Lock()
		in.exitErr = err
		in.mu.Unlock()
		close(in.done)
	}()
	return in, nil
}

type inproc struct {
	s      Server
	root   string
	logs   *logBuffer
	url    string
	cancel context.CancelFunc
	done   chan struct{}
	bound  time.Duration // how long Close waits for the exit
	trace  string
	keep   string // ServerSpec.keepTrace

	mu      sync.Mutex
	exitErr error
	began   time.Time
}

func (in *inproc) URL() string           { return in.url }
func (in *inproc) TracePath() string     { return in.trace }
func (in *inproc) Handler() http.Handler { return in.s.Handler() }
func (in *inproc) Done() <-chan struct{} { return in.done }
func (in *inproc) Logs() string          { return in.logs.String() }
func (in *inproc) OpenSessions() (int, bool) {
	if fx := in.s.Fixture(); fx != nil {
		return fx.OpenSessions(), true
	}
	return 0, false
}

func (in *inproc) ExitErr() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.exitErr
}

func (in *inproc) ShutdownBegan() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.began
}

func (in *inproc) Shutdown(string) error {
	in.mu.Lock()
	if in.began.IsZero() {
		in.began = time.Now()
	}
	in.mu.Unlock()
	in.cancel() // what the first signal does in `sluice serve`
	return nil
}

func (in *inproc) Signal(string) error {
	if in.ShutdownBegan().IsZero() {
		return in.Shutdown("")
	}
	// A second Shutdown call waits for the first and changes nothing.
	go func() { _ = in.s.Shutdown(context.Background()) }()
	return nil
}

func (in *inproc) Close() error {
	_ = in.Shutdown("")
	var errs []error
	select {
	case <-in.done:
	case <-time.After(in.bound):
		errs = append(errs, errors.New("server did not exit after its shutdown deadline"))
	}
	if fx := in.s.Fixture(); fx != nil {
		if n := fx.OpenSessions(); n != 0 {
			errs = append(errs, fmt.Errorf("%d fixture sessions left open after shutdown", n))
		}
		if v := fx.Violations(); len(v) > 0 {
			errs = append(errs, fmt.Errorf("fixture session rules broken: %v", v))
		}
	}
	if err := keepTrace(in.trace, in.keep); err != nil {
		errs = append(errs, err)
	}
	in.keep = "" // a second Close (after a failed restart) has nothing left to keep
	_ = os.RemoveAll(in.root)
	return errors.Join(errs...)
}

// Binary starts `PATH serve ...` processes on 127.0.0.1 with a free port.
// Env is added to the process environment (for example
// SLUICE_MUTANTS=barge).
type Binary struct {
	Path string
	Env  []string

	_ struct{}
}

// Kind returns "binary".
func (Binary) Kind() string { return "binary" }

// Start runs the binary and waits until it logs its listening address.
func (l Binary) Start(spec ServerSpec) (Instance, error) {
	root, err := os.MkdirTemp("", "sluice-conformance-")
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	cfgFile := filepath.Join(root, "models.yaml")
	cfg, err := spec.startupConfig()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	cmd := exec.Command(l.Path, spec.flags(root, cfgFile)...)
	cmd.Env = append(os.Environ(), l.Env...)
	pr, pw := io.Pipe()
	logs := &logBuffer{}
	cmd.Stderr = pw
	cmd.Stdout = logs
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("conformance: start %s: %w", l.Path, err)
	}
	b := &binproc{cmd: cmd, root: root, logs: logs, done: make(chan struct{}), bound: spec.shutdownTimeout() + 5*time.Second,
		trace: spec.tracePath(root), keep: spec.keepTrace}
	addr, scanned := listenlog.Scan(pr, func(line string) { _, _ = logs.Write([]byte(line + "\n")) })
	go func() {
		err := cmd.Wait()
		_ = pw.Close()
		<-scanned
		b.mu.Lock()
		b.exitErr = err
		b.mu.Unlock()
		close(b.done)
	}()
	select {
	case a := <-addr:
		b.url = "http://" + a
		return b, nil
	case <-b.done:
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("conformance: %s exited before listening: %v\n%s", l.Path, b.ExitErr(), logs.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-b.done
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("conformance: %s did not log its address within 30s\n%s", l.Path, logs.String())
	}
}

type binproc struct {
	cmd   *exec.Cmd
	root  string
	logs  *logBuffer
	url   string
	done  chan struct{}
	bound time.Duration // how long Close waits for the exit before it kills
	trace string
	keep  string // ServerSpec.keepTrace

	mu      sync.Mutex
	exitErr error
	began   time.Time
}

func (b *binproc) URL() string               { return b.url }
func (b *binproc) TracePath() string         { return b.trace }
func (b *binproc) Handler() http.Handler     { return nil }
func (b *binproc) Done() <-chan struct{}     { return b.done }
func (b *binproc) Logs() string              { return b.logs.String() }
func (b *binproc) OpenSessions() (int, bool) { return 0, false }

func (b *binproc) ExitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exitErr
}

func (b *binproc) ShutdownBegan() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.began
}

func signalOf(name string) os.Signal {
	if name == "INT" {
		return syscall.SIGINT
	}
	return syscall.SIGTERM
}

func (b *binproc) Shutdown(sig string) error {
	b.mu.Lock()
	if b.began.IsZero() {
		b.began = time.Now()
	}
	b.mu.Unlock()
	return b.Signal(sig)
}

func (b *binproc) Signal(sig string) error {
	select {
	case <-b.done:
		return nil
	default:
	}
	if err := b.cmd.Process.Signal(signalOf(sig)); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("conformance: signal: %w", err)
	}
	return nil
}

// Kill ends the process with SIGKILL (a restart step's crash).
func (b *binproc) Kill() error {
	if err := b.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("conformance: kill: %w", err)
	}
	<-b.done
	return nil
}

func (b *binproc) Close() error {
	var errs []error
	select {
	case <-b.done:
	default:
		_ = b.Shutdown("TERM")
		select {
		case <-b.done:
		case <-time.After(b.bound):
			_ = b.cmd.Process.Kill()
			<-b.done
			errs = append(errs, errors.New("server process did not exit after its shutdown deadline; killed"))
		}
	}
	if err := keepTrace(b.trace, b.keep); err != nil {
		errs = append(errs, err)
	}
	b.keep = ""
	_ = os.RemoveAll(b.root)
	return errors.Join(errs...)
}
