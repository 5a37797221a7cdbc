package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/auth"
	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/events"
	"github.com/sluice-dev/sluice/server/internal/follow"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/metrics"
	"github.com/sluice-dev/sluice/server/internal/modelsroot"
	"github.com/sluice-dev/sluice/server/internal/realtime"
	"github.com/sluice-dev/sluice/server/internal/registry"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// Options are what a Server needs beyond the flags of Config.
type Options struct {
	// Logger receives the server's and the runtime's logs; nil uses
	// slog.Default().
	Logger *slog.Logger
	// Engines are the engines to serve besides the fixture, which Config.Fixture
	// adds. Real engines come from the engines' registry (see cmd/sluice).
	Engines backends.Registry
	// Trace, when set, receives the scheduler's ndjson trace; it takes
	// precedence over Config.TraceFile.
	Trace io.Writer
	// CheckInvariants makes the runtime check the core's invariants after
	// every event (tests).
	CheckInvariants bool

	_ struct{}
}

// ParallelWarning is the one startup warning of the parallel runtime
// (CONTRACT.md mode.parallel), one short line: it is experimental and
// applies to every model, one-slot ones included, and its
// lifecycle coverage (shutdown, reconfiguration, eviction and disconnects
// are verified with the fixture engine only; device memory after teardown
// is unverified on GPUs) and engine coverage (more than one slot only on an
// engine that advertises a parallel factory) are incomplete. The details
// are in CONTRACT.md, not in every start's log.
const ParallelWarning = "parallel runtime enabled (--parallel-jobs): experimental, one-slot models included; " +
	"lifecycle and engine coverage incomplete (see CONTRACT.md mode.parallel)"

// Server is Sluice's HTTP server: the runtime, its engines, the chi router,
// the metrics and the http.Server with its connection tracking.
type Server struct {
	cfg     Config
	tls     *tls.Config // --tls-cert, --tls-key (tls.go); nil: plain HTTP
	log     *slog.Logger
	rt      *runtime.Runtime
	fx      *fixture.Engine
	met     *metrics.Metrics
	follow  *follow.Follower // the one runtime subscription: metrics and events
	events  *events.Hub      // GET /v1/events
	roots   *modelsroot.Root // --models-root and its catalogue, swapped together
	handler http.Handler
	hs      *http.Server
	edge    *edge.Edge         // connections, body limits, Host and Origin (server/internal/edge)
	trace   *os.File           // opened from Config.TraceFile, closed after shutdown
	auth    *auth.Auth         // keys and dashboard sessions (internal/auth), built with the routes
	refuse  *httpapi.Refusals  // CONTRACT.md err.refusal-log
	live    *realtime.Sessions // open realtime sessions (server/internal/realtime)
	created wire.Created       // each model's registration second (model.go)

	scanLogged sync.Once // the startup root's scan failure, logged once

	startupMu sync.Mutex
	startup   []string // the startup config's model IDs (RegisterModels): /v2/health/ready waits for them
	// failedAtStart holds the startup models whose load at start failed,
	// until readiness sees them loaded or acted on (CONTRACT.md oip.ready).
	failedAtStart map[string]bool

	// reg runs the management operations with their durability
	// (server/internal/registry); store is its --state-dir, nil without
	// it, whose lock is released after shutdown.
	reg   *registry.Registry
	store *registry.Store
	// restored lists the models restored from the registry and whether each
	// is to be loaded (LoadRestored), and restoredOrder their registration
	// order; written only in New.
	restored      map[string]bool
	restoredOrder []string

	stopping     atomic.Bool
	shutdownOnce sync.Once
	shutdownDone chan struct{}
	shutdownErr  error
}

// New builds a Server from cfg: it starts the runtime (call Shutdown to stop
// it) but does not listen yet (see Serve and Run). With cfg.ParallelJobs it
// logs ParallelWarning once. With cfg.StateDir it locks the state dir and
// registers the models recorded there, unloaded; LoadRestored then loads
// those recorded as loaded, before RegisterModels and serving.
func New(cfg Config, opts Options) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tlsConf, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	engines := backends.Registry{}
	maps.Copy(engines, opts.Engines)
	var fx *fixture.Engine
	if cfg.Fixture {
		fx = fixture.New()
		engines[fixture.Name] = fx
	} else {
		delete(engines, fixture.Name) // the fixture is served only with --fixture
	}
	e, err := newEdge(cfg, log)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tls: tlsConf, log: log, fx: fx, edge: e, shutdownDone: make(chan struct{}), restored: map[string]bool{},
		live: realtime.NewSessions()}
	fail := func(err error) (*Server, error) {
		if s.rt != nil {
			_ = s.rt.Shutdown(context.Background())
		}
		if s.trace != nil {
			_ = s.trace.Close()
		}
		_ = s.store.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.StateDir != "" { // CONTRACT.md persist.lock, persist.corrupt: before anything else starts
		store, err := registry.Open(cfg.StateDir, log)
		if err != nil {
			return fail(err)
		}
		s.store = store
		if root := store.State().ModelsRoot; root != "" && root != cfg.ModelsRoot { // persist.models-root: the committed setting wins
			log.Info("models root restored from the state dir", "models_root", root, "flag", cfg.ModelsRoot)
			s.cfg.ModelsRoot = root
		}
	}
	trace := opts.Trace
	if trace == nil && cfg.TraceFile != "" { // persist.trace-kept: never truncated
		moved, err := rotateTrace(cfg.TraceFile)
		if err != nil {
			return fail(fmt.Errorf("trace file: %w", err))
		}
		if moved != "" {
			log.Info("trace of the earlier run kept", "file", moved)
		}
		f, err := os.OpenFile(cfg.TraceFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fail(fmt.Errorf("trace file: %w", err))
		}
		s.trace, trace = f, f
		if err := writeTraceOptions(cfg.TraceFile, cfg.coreOptions()); err != nil { // for sluice sim --replay
			return fail(err)
		}
	}
	// An engine that checks a model's memory need before loading falls
	// back to the budget where no cgroup limit or physical memory is known.
	backends.SetMemoryBudget(cfg.MemoryBudgetMB)
	epoch := time.Now() // the scheduler clock's zero, within microseconds, for event times
	rt, err := runtime.New(runtime.Options{Core: cfg.coreOptions(), Engines: engines, Trace: trace, Logger: log, WaitBuckets: metrics.WaitBuckets(),
		CheckInvariants: opts.CheckInvariants, LiveInvariants: cfg.LiveInvariants, MaxModels: cfg.MaxModels})
	if err != nil {
		return fail(err)
	}
	s.rt = rt
	s.reg = registry.New(rt, s.store, log)
	restored, err := s.reg.Restore(context.Background()) // persist.restore: registered unloaded at their versions; LoadRestored loads
	if err != nil {
		return fail(err)
	}
	for _, m := range restored {
		s.restored[m.ID] = m.Loaded && !m.Unregistered // a tombstone: known to the state dir, so a startup config does not bring it back
		if !m.Unregistered {
			s.created.Note(m.ID, time.Now())
			s.restoredOrder = append(s.restoredOrder, m.ID)
			log.Info("model restored from the state dir", "model", m.ID, "config_version", m.ConfigVersion, "loaded", m.Loaded)
		}
	}
	s.met = metrics.New(rt.Status, rt.AdmissionStats)
	s.met.Register(s.edge.Collectors()...)
	s.met.Checks(rt)
	s.refuse = httpapi.NewRefusals(s.met.Refusal)
	s.events = events.New(events.Options{Epoch: epoch, Log: log, Status: s.statusObject, ShuttingDown: rt.ShuttingDown})
	s.follow = follow.Start(rt, log, s.met, s.events) // before New returns: no lifecycle step is missed
	s.events.Follow(s.follow)
	s.roots = modelsroot.New(s.cfg.ModelsRoot, engines)
	s.roots.Commit = s.reg.SetRoot
	s.handler = s.routes()
	s.hs = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleConnTimeout,
		MaxHeaderBytes:    1 << 20,
		ConnState:         s.edge.ConnState,
		ConnContext:       edge.ConnContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if cfg.ParallelJobs {
		log.Warn(ParallelWarning) // CONTRACT.md mode.parallel: exactly one warning
	}
	return s, nil
}

// validate checks a Config before anything starts.
func (c *Config) validate() error {
	switch {
	case c.MaxBody <= 0:
		return errors.New("server: --max-body must be positive")
	case c.MaxModels < 0:
		return errors.New("server: --max-models must not be negative")
	case c.LiveInvariants < 0:
		return errors.New("server: --live-invariants must not be negative")
	case c.MaxLoadedModels < 0, c.MemoryBudgetMB < 0:
		return errors.New("server: residency limits must not be negative")
	case c.IdleTimeout < 0, c.AdmissionTimeout < 0, c.AdmissionCeiling < 0, c.ShutdownTimeout < 0,
		c.LoadBackoff < 0, c.LoadBackoffMax < 0,
		c.ReadHeaderTimeout < 0, c.IdleConnTimeout < 0, c.WriteTimeout < 0, c.BodyReadTimeout < 0, c.BodyRateGrace < 0:
		return errors.New("server: durations must not be negative")
	case c.RealtimeIdle < 0, c.RealtimeMaxSession < 0, c.RealtimeDrain < 0, c.RealtimeMaxRate < 0:
		return errors.New("server: realtime limits must not be negative")
	case c.RealtimeBuffer < 100*time.Millisecond:
		return errors.New("server: --realtime-buffer must be at least 100ms")
	case c.SignInLimit < 0:
		return errors.New("server: --sign-in-limit must not be negative")
	case c.MinBodyRate < 0, c.BodyBudget < 0, c.SpoolBudget < 0:
		return errors.New("server: --min-body-rate, --body-budget and --spool-budget must not be negative")
	case c.MaxJSONBody <= 0, c.SpoolThreshold <= 0:
		return errors.New("server: --max-json-body and --spool-threshold must be positive")
	}
	return nil
}

// coreOptions are the scheduler's machine-wide settings from the flags.
func (c *Config) coreOptions() core.Options {
	return core.Options{
		MaxLoadedModels:         c.MaxLoadedModels,
		MemoryBudgetMB:          c.MemoryBudgetMB,
		IdleTimeout:             int64(c.IdleTimeout),
		DefaultAdmissionTimeout: int64(c.AdmissionTimeout),
		AdmissionCeiling:        int64(c.AdmissionCeiling),
		SerializeColdLoads:      c.SerializeColdLoads,
		LoadBackoff:             int64(c.LoadBackoff),
		LoadBackoffMax:          int64(c.LoadBackoffMax),
	}
}

// Handler returns the server's HTTP handler (router and middleware).
func (s *Server) Handler() http.Handler { return s.handler }

// Runtime returns the live scheduler behind the server.
func (s *Server) Runtime() *runtime.Runtime { return s.rt }

// Fixture returns the fixture engine, or nil without Config.Fixture.
func (s *Server) Fixture() *fixture.Engine { return s.fx }

// ShuttingDown reports whether Shutdown has begun.
func (s *Server) ShuttingDown() bool { return s.stopping.Load() }

// LoadRestored loads, in registration order, the models restored from
// --state-dir whose desired state is loaded (CONTRACT.md persist.restore),
// as a startup config's models are loaded; a load that fails leaves the
// model registered and unloaded, which is logged. Call it before
// RegisterModels.
func (s *Server) LoadRestored(ctx context.Context) error {
	for _, id := range s.restoredOrder {
		if !s.restored[id] {
			continue
		}
		st, err := s.rt.Load(ctx, id)
		switch runtime.CodeOf(err) {
		case core.CodeOK:
			s.log.Info("restored model loaded", "model", id, "config_version", st.ConfigVersion)
		case core.CodeShuttingDown, core.CodeCancelled:
			return fmt.Errorf("server: model %q: %w", id, err)
		default:
			s.log.Warn("restored model not loaded", "model", id, "err", err)
			s.noteFailedAtStart(id)
		}
	}
	return nil
}

// RegisterModels registers and loads the models of a startup config file in
// order. An invalid spec stops it with an error; a model whose first load
// fails stays registered and unloaded (CONTRACT.md reg.first-load-failure),
// which is logged. A model restored from --state-dir keeps its restored
// spec and state: the registry wins for the IDs it knows, and the config's
// other models are added (CONTRACT.md persist.config-merge). They are
// recorded once a management change touches them.
func (s *Server) RegisterModels(ctx context.Context, models []ModelEntry) error {
	s.noteStartupModels(models) // CONTRACT.md oip.ready
	for _, m := range models {
		if _, ok := s.restored[m.ID]; ok {
			if s.rt.Unregistered(m.ID) { // CONTRACT.md unreg.persisted, persist.config-merge
				s.log.Info("startup model not registered: it was deleted (DELETE /v1/models/{id}) and the state dir keeps that; a PUT registers it again", "model", m.ID)
				continue
			}
			s.log.Info("startup model kept as restored from the state dir; its config entry is not applied", "model", m.ID)
			continue
		}
		spec, err := m.Spec.ToRuntime(s.cfg.ParallelJobs, s.roots.Path())
		if err != nil {
			return fmt.Errorf("server: model %q: %w", m.ID, err)
		}
		st, err := s.apply(ctx, m.ID, spec, s.rt.Apply)
		var e *httpapi.Error
		if errors.As(err, &e) && e.Code == "too_many_models" {
			return fmt.Errorf("server: model %q: %s", m.ID, e.Message)
		}
		switch runtime.CodeOf(err) {
		case core.CodeOK:
			s.log.Info("model registered", "model", m.ID, "engine", st.Engine, "slots", st.Slots,
				"max_parallel_slots", st.MaxParallelSlots)
		case core.CodeInvalid, core.CodeShuttingDown, core.CodeCancelled:
			return fmt.Errorf("server: model %q: %w", m.ID, err)
		default:
			s.log.Warn("model registered but not loaded", "model", m.ID, "err", err)
			s.noteFailedAtStart(m.ID)
		}
	}
	return nil
}

// startupModels returns the IDs the startup config named (RegisterModels):
// /v2/health/ready waits for them (oip.Host.StartupModels).
func (s *Server) startupModels() []string {
	s.startupMu.Lock()
	defer s.startupMu.Unlock()
	return s.startup
}

// noteFailedAtStart records that the load at start of id failed: it holds
// /v2/health/ready back until it loads or an operator acts on it
// (CONTRACT.md oip.ready).
func (s *Server) noteFailedAtStart(id string) {
	s.startupMu.Lock()
	defer s.startupMu.Unlock()
	if s.failedAtStart == nil {
		s.failedAtStart = map[string]bool{}
	}
	s.failedAtStart[id] = true
}

// startupFailure reports whether id failed its load at start and has not
// been seen resolved since; resolved forgets the failure for good.
func (s *Server) startupFailure(id string, resolved bool) bool {
	s.startupMu.Lock()
	defer s.startupMu.Unlock()
	if resolved {
		delete(s.failedAtStart, id)
		return false
	}
	return s.failedAtStart[id]
}

// noteStartupModels records the startup config's IDs for readiness.
func (s *Server) noteStartupModels(models []ModelEntry) {
	s.startupMu.Lock()
	defer s.startupMu.Unlock()
	for _, m := range models {
		s.startup = append(s.startup, m.ID)
	}
}
