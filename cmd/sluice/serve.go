package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/server"
)

// defaultModelsYAML is the models file used when no --config is given.
//
//go:embed default-models.yaml
var defaultModelsYAML []byte

// serveOptions are the parsed flags of `sluice serve`.
type serveOptions struct {
	cfg        server.Config
	configFile string
	logLevel   slog.Level
}

// parseServeFlags reads the flags of `sluice serve` ("The command"). Keys may also come from SLUICE_API_KEY and
// SLUICE_MANAGEMENT_KEY, which keeps them out of the process list.
func parseServeFlags(args []string, stderr io.Writer) (serveOptions, error) {
	o := serveOptions{cfg: server.DefaultConfig()}
	c := &o.cfg
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Listen, "listen", c.Listen, "address to listen on (host:port)")
	fs.BoolVar(&c.ParallelJobs, "parallel-jobs", false, "use the parallel runtime (experimental); without it the legacy single-session mode refuses any slots field")
	fs.BoolVar(&c.UIManagement, "ui-management", false, "enable the management endpoints (register, load, unload); 403 without it")
	fs.BoolVar(&c.Fixture, "fixture", false, "serve the fixture engine and the /v1/fixture gate endpoints (tests and demos)")
	fs.StringVar(&c.APIKey, "api-key", os.Getenv("SLUICE_API_KEY"), "Bearer key for every endpoint but /healthz, /readyz and the dashboard shell; the dashboard signs in with it (default $SLUICE_API_KEY)")
	fs.StringVar(&c.ManagementKey, "management-key", os.Getenv("SLUICE_MANAGEMENT_KEY"), "Bearer key for the management endpoints (default $SLUICE_MANAGEMENT_KEY)")
	fs.IntVar(&c.SignInLimit, "sign-in-limit", server.DefaultSignInLimit, "failed dashboard sign-ins allowed a minute (over it, sign-ins are 429)")
	maxBody := fs.String("max-body", "25MiB", "request body limit (bytes, or with a unit such as 25MiB)")
	fs.StringVar(&c.ModelsRoot, "models-root", c.ModelsRoot, "folder of checkpoints; checkpoint paths must stay inside it")
	fs.IntVar(&c.MaxLoadedModels, "max-loaded-models", 0, "most resident models at once (0: unlimited)")
	budget := fs.String("memory-budget", "0", "memory budget of resident pools (megabytes, or with a unit such as 8GiB; 0: unlimited)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 0, "retire a ready model idle this long (0: never)")
	fs.DurationVar(&c.AdmissionTimeout, "admission-timeout", 0, "default admission wait of a request (0: unbounded)")
	fs.DurationVar(&c.AdmissionCeiling, "admission-ceiling", 0, "upper bound of every admission wait, request overrides included (0: none)")
	fs.DurationVar(&c.LoadBackoff, "load-backoff", c.LoadBackoff, "after a model's load fails, refuse requests that would load it again for this long, doubling per failure (0: no backoff)")
	fs.DurationVar(&c.LoadBackoffMax, "load-backoff-max", c.LoadBackoffMax, "cap of the doubled load backoff")
	fs.BoolVar(&c.SerializeColdLoads, "serialize-cold-loads", false, "run at most one model load at a time (warm models keep serving)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "bound of the whole exit after SIGINT or SIGTERM (0: wait for finite work)")
	fs.StringVar(&o.configFile, "config", "", "YAML file of models to register at start (default: the embedded default models)")
	fs.StringVar(&c.TraceFile, "trace", "", "write every scheduler event and effect to this ndjson file (an earlier run's trace there is moved to FILE.N first)")
	fs.StringVar(&c.StateDir, "state-dir", "", "keep every committed management change in this folder and restore it at start; it wins over --config and --models-root for what it recorded (default: keep nothing)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", c.ReadHeaderTimeout, "time allowed to read a request header")
	fs.DurationVar(&c.IdleConnTimeout, "idle-conn-timeout", c.IdleConnTimeout, "keep-alive connections idle this long are closed")
	hosts := fs.String("allowed-hosts", "", "comma-separated Host names served besides localhost, 127.0.0.1, [::1] and the --listen host (name or name:port); '*' accepts any Host (unsafe: DNS rebinding)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate (chain) file: with --tls-key, serve HTTPS and wss: (HTTP/1.1) instead of plain HTTP")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key file of --tls-cert")
	origins := fs.String("allowed-origins", "", "comma-separated browser origins (scheme://host[:port]) trusted to send state-changing requests from another site")
	fs.IntVar(&c.MaxModels, "max-models", c.MaxModels, "most registered models (0: unlimited); registering one more is refused with 400 too_many_models")
	fs.IntVar(&c.LiveInvariants, "live-invariants", c.LiveInvariants, "check the scheduler's invariants once per N scheduler events (N more for every 8 models and queued or running requests), counting violations in sluice_invariant_violations_total (0: off)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "drop a client that accepts no bytes of its answer for this long, releasing its slot (0: never)")
	fs.DurationVar(&c.BodyReadTimeout, "body-read-timeout", c.BodyReadTimeout, "time allowed to receive a whole request body; 408 past it (0: none)")
	minRate := fs.String("min-body-rate", "1KiB", "slowest request body accepted after --body-rate-grace, per second (bytes, or with a unit; 0: none); 408 below it")
	fs.DurationVar(&c.BodyRateGrace, "body-rate-grace", c.BodyRateGrace, "time a request body may take before --min-body-rate applies")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "most open connections (0: RLIMIT_NOFILE less 64, at least 16; negative: no limit); past it the oldest idle connection is closed")
	maxJSON := fs.String("max-json-body", "1MiB", "JSON request body limit (bytes, or with a unit)")
	spoolThreshold := fs.String("spool-threshold", "1MiB", "uploads longer than this are spooled to a temporary file instead of memory")
	fs.StringVar(&c.SpoolDir, "spool-dir", "", "folder of spooled uploads (default: the system's temporary folder)")
	bodyBudget := fs.String("body-budget", "256MiB", "request body bytes held in memory by all requests in flight; 503 over it (0: unlimited)")
	spoolBudget := fs.String("spool-budget", "4GiB", "spooled request body bytes on disk for all requests in flight; 503 over it (0: unlimited)")
	fs.DurationVar(&c.RealtimeIdle, "realtime-idle", c.RealtimeIdle, "close a live session (GET /v1/realtime) whose client sends nothing for this long, with 1008 (0: never)")
	fs.DurationVar(&c.RealtimeMaxSession, "realtime-max-session", c.RealtimeMaxSession, "longest live session; then it is closed with 1008 (0: unbounded)")
	fs.DurationVar(&c.RealtimeDrain, "realtime-drain", c.RealtimeDrain, "how long live sessions go on once a manager (unload, reconfigure) waits on their model; then they close with 1012")
	fs.DurationVar(&c.RealtimeBuffer, "realtime-buffer", c.RealtimeBuffer, "audio a live session may hold not yet decoded; past it the socket is not read (backpressure)")
	fs.Float64Var(&c.RealtimeMaxRate, "realtime-max-rate", c.RealtimeMaxRate, "most audio seconds a live session may send per second beyond a --realtime-buffer burst; 1008 past it (0: unchecked)")
	fs.StringVar(&c.RealtimeVADModel, "realtime-vad-model", "", "VAD model of live sessions' server_vad turn detection when a session names none")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := parseFlags(fs, args, stderr, func(w io.Writer) { serveHelp(w, fs) }); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, &usageError{cmd: "serve", err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	c.AllowedHosts, c.AllowedOrigins = splitList(*hosts), splitList(*origins)
	var err error
	if c.MaxBody, err = parseBytes(*maxBody); err != nil {
		return o, fmt.Errorf("serve: --max-body: %w", err)
	}
	for _, b := range []struct {
		flag string
		in   *string
		out  *int64
	}{{"min-body-rate", minRate, &c.MinBodyRate}, {"max-json-body", maxJSON, &c.MaxJSONBody},
		{"spool-threshold", spoolThreshold, &c.SpoolThreshold}, {"body-budget", bodyBudget, &c.BodyBudget},
		{"spool-budget", spoolBudget, &c.SpoolBudget}} {
		if *b.out, err = parseBytes(*b.in); err != nil {
			return o, fmt.Errorf("serve: --%s: %w", b.flag, err)
		}
	}
	if c.MemoryBudgetMB, err = parseMB(*budget); err != nil {
		return o, fmt.Errorf("serve: --memory-budget: %w", err)
	}
	if err := o.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return o, fmt.Errorf("serve: --log-level: %w", err)
	}
	return o, nil
}

// serveDescription opens `sluice serve -h`.
const serveDescription = `usage: sluice serve [flags]

serve runs the Sluice HTTP server: the OpenAI-compatible speech routes
(/v1/audio/speech, /v1/audio/transcriptions), the model API (/v1/models),
the management API, the event stream, /metrics, and the dashboard at /.
It registers the models of --config (without it, the embedded defaults
whose engines and checkpoints are present), loads each on its first
request within --memory-budget and --max-loaded-models, retires idle ones
after --idle-timeout, and on SIGINT or SIGTERM finishes its work and exits
within --shutdown-timeout. Keys may come from the environment
(SLUICE_API_KEY, SLUICE_MANAGEMENT_KEY), which keeps them out of the
process list.
`

// serveExample closes `sluice serve -h`.
const serveExample = `Example:
  SLUICE_API_KEY=secret sluice serve --listen 0.0.0.0:8080 \
    --allowed-hosts sluice.internal --models-root /srv/models --memory-budget 8GiB
`

// serveFlagGroups orders `sluice serve -h`: every flag belongs to one
// group (TestServeHelp); one left out would be printed under "Other".
var serveFlagGroups = []struct {
	title string
	flags []string
}{
	{"Listening and limits", []string{"listen", "tls-cert", "tls-key", "allowed-hosts", "allowed-origins", "max-conns", "max-body", "max-json-body",
		"spool-threshold", "spool-dir", "body-budget", "spool-budget"}},
	{"Models", []string{"config", "models-root", "max-models", "max-loaded-models", "memory-budget", "idle-timeout",
		"parallel-jobs", "serialize-cold-loads", "load-backoff", "load-backoff-max", "fixture"}},
	{"Keys and access", []string{"api-key", "management-key", "ui-management", "sign-in-limit"}},
	{"Timeouts", []string{"admission-timeout", "admission-ceiling", "read-header-timeout", "idle-conn-timeout",
		"write-timeout", "body-read-timeout", "min-body-rate", "body-rate-grace", "shutdown-timeout"}},
	{"Live sessions", []string{"realtime-idle", "realtime-max-session", "realtime-drain", "realtime-buffer", "realtime-max-rate", "realtime-vad-model"}},
	{"State, logs and tracing", []string{"state-dir", "trace", "log-level", "live-invariants"}},
}

// serveHelp writes `sluice serve -h`: the description, the flags by
// group, an example.
func serveHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, serveDescription+"\n")
	grouped := map[string]bool{}
	for _, g := range serveFlagGroups {
		fmt.Fprintf(w, "%s:\n", g.title)
		printFlags(w, fs, g.flags)
		fmt.Fprintln(w)
		for _, n := range g.flags {
			grouped[n] = true
		}
	}
	var other []string
	fs.VisitAll(func(f *flag.Flag) {
		if !grouped[f.Name] {
			other = append(other, f.Name)
		}
	})
	if len(other) > 0 {
		fmt.Fprintln(w, "Other:")
		printFlags(w, fs, other)
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, serveExample)
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// startupModels returns the models to register at start: those of
// --config, strictly; else the embedded defaults, keeping only entries
// whose engine is served and dropping their slots field in the legacy mode.
func startupModels(o *serveOptions, log *slog.Logger) ([]server.ModelEntry, error) {
	if o.configFile != "" {
		return server.LoadModelsFile(o.configFile)
	}
	all, err := server.ParseModelsYAML(defaultModelsYAML)
	if err != nil {
		return nil, fmt.Errorf("embedded default models: %w", err)
	}
	served := realEngines()
	var out []server.ModelEntry
	for _, m := range all {
		_, real := served[m.Spec.Engine]
		if !real && !(m.Spec.Engine == fixture.Name && o.cfg.Fixture) {
			log.Info("default model skipped: its engine is not served", "model", m.ID, "engine", m.Spec.Engine)
			continue
		}
		if real && m.Spec.Checkpoint != "" {
			if _, err := os.Stat(filepath.Join(o.cfg.ModelsRoot, m.Spec.Checkpoint)); err != nil {
				log.Info("default model skipped: its checkpoint is not under --models-root (make models builds it)",
					"model", m.ID, "checkpoint", m.Spec.Checkpoint, "models_root", o.cfg.ModelsRoot)
				continue
			}
		}
		if !o.cfg.ParallelJobs && m.Spec.Slots != nil {
			m.Spec.Slots = nil // the legacy server runs one session per model
		}
		out = append(out, m)
	}
	return out, nil
}

// serve runs `sluice serve` until the first signal on sigs, then shuts down
// within --shutdown-timeout; if work that ignores cancellation keeps the
// shutdown from returning exitMargin past it, serve logs that work and
// returns errStuckExit without waiting for it (time.shutdown-stuck-native). A second signal changes nothing but is logged
// (CONTRACT.md time.shutdown-second-signal). ready, when set, is called
// with the server and its listening address once the startup models are
// registered (tests).
func serve(ctx context.Context, args []string, stderr io.Writer, sigs <-chan os.Signal, ready func(*server.Server, net.Addr)) error {
	o, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	models, err := startupModels(&o, log)
	if err != nil {
		return err
	}
	if nofile, err := server.RaiseFileLimit(); err != nil {
		log.Warn("RLIMIT_NOFILE not raised", "soft", nofile, "err", err)
	} else {
		log.Info("RLIMIT_NOFILE", "soft", nofile)
	}
	s, err := server.New(o.cfg, server.Options{Logger: log, Engines: realEngines()})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.cfg.Listen)
	if err != nil {
		_ = s.Shutdown(context.Background())
		return fmt.Errorf("serve: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { watchSignals(sigs, done, cancel, log) })
	defer func() {
		close(done)
		wg.Wait()
	}()
	// The restore order: New registered the state dir's models (unloaded, at
	// their recorded config_version) and restored the models root; now the
	// ones recorded as loaded are loaded, then the startup config adds the
	// IDs the state dir does not know (CONTRACT.md persist.config-merge).
	err = s.LoadRestored(ctx)
	if err == nil {
		err = s.RegisterModels(ctx, models)
	}
	if err != nil {
		interrupted := ctx.Err() != nil // a signal during startup: a normal exit
		cancel()
		_ = ln.Close()
		sctx, scancel := shutdownContext(o.cfg.ShutdownTimeout)
		defer scancel()
		down := make(chan error, 1)
		go func() { down <- s.Shutdown(sctx) }()
		if serr := boundExit(down, o.cfg.ShutdownTimeout, s); errors.Is(serr, errStuckExit) {
			return serr
		}
		if interrupted {
			return nil
		}
		return err
	}
	if ready != nil {
		ready(s, ln.Addr())
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx, ln) }()
	select {
	case err := <-ran:
		return err
	case <-ctx.Done(): // a signal: Run has begun the shutdown
	}
	return boundExit(ran, o.cfg.ShutdownTimeout, s)
}

// exitMargin is how long past --shutdown-timeout the process waits for its
// shutdown to return before it gives up on work that ignores cancellation
// (CONTRACT.md time.shutdown-stuck-native): time for the handlers whose
// work the deadline did cancel to write their answers and last log lines.
const exitMargin = 250 * time.Millisecond

// exitStuck is the exit status of `sluice serve` when it gave up on stuck
// work (errStuckExit); other failures exit 1, a clean shutdown 0.
const exitStuck = 3

// errStuckExit means the shutdown deadline passed while work that ignores
// its context (an engine call that never returns, such as a native call)
// kept the shutdown from returning; serve returned without it.
var errStuckExit = errors.New("shutdown deadline passed with work that ignores cancellation still running; exiting without it")

// boundExit waits for a shutdown's result on done, for at most timeout
// plus exitMargin (timeout 0: no bound). When the bound passes first it
// logs the work still running (server.LogStuckWork) and returns
// errStuckExit: the exit never depends on a goroutine stuck in an engine.
func boundExit(done <-chan error, timeout time.Duration, s *server.Server) error {
	if timeout <= 0 {
		return <-done
	}
	t := time.NewTimer(timeout + exitMargin)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	s.LogStuckWork()
	return errStuckExit
}

func shutdownContext(d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(context.Background(), d)
	}
	return context.WithCancel(context.Background())
}

// watchSignals cancels the server's context on the first signal and logs
// every later one, until done is closed.
func watchSignals(sigs <-chan os.Signal, done <-chan struct{}, cancel context.CancelFunc, log *slog.Logger) {
	n := 0
	for {
		select {
		case sig := <-sigs:
			n++
			if n == 1 {
				log.Info("signal received; shutting down", "signal", sig.String())
				cancel()
			} else {
				log.Warn("signal received while shutting down; the shutdown goes on unchanged", "signal", sig.String(), "count", n)
			}
		case <-done:
			return
		}
	}
}
