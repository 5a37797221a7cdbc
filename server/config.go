package server

import (
	"time"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
	"github.com/sluice-dev/sluice/server/internal/modelspec"
)

// Config is the server's configuration: what `sluice serve` flags set.
type Config struct {
	Listen          string        // default 127.0.0.1:8080
	ParallelJobs    bool          // the parallel runtime; without it the legacy single-session mode
	UIManagement    bool          // management endpoints enabled
	Fixture         bool          // the fixture engine and /v1/fixture endpoints
	APIKey          string        // Bearer key for every endpoint but /healthz, /readyz, the dashboard shell and its sign-in
	ManagementKey   string        // Bearer key for management endpoints
	SignInLimit     int           // failed dashboard sign-ins allowed a minute; 0: DefaultSignInLimit
	MaxBody         int64         // request body limit in bytes, default 25 MiB
	ModelsRoot      string        // folder of checkpoints
	MaxLoadedModels int           // 0: unlimited
	MemoryBudgetMB  int64         // 0: unlimited
	IdleTimeout     time.Duration // 0: never retire
	// AdmissionTimeout is the server default admission wait (0: unbounded);
	// AdmissionCeiling bounds every effective one, including request
	// overrides (0: none).
	AdmissionTimeout   time.Duration
	AdmissionCeiling   time.Duration
	SerializeColdLoads bool
	// LoadBackoff is the first backoff after a model's load fails (0: none)
	// and LoadBackoffMax the cap of its doubling (CONTRACT.md
	// fail.load-backoff).
	LoadBackoff       time.Duration
	LoadBackoffMax    time.Duration
	ShutdownTimeout   time.Duration // bounds the whole exit; 0: wait for finite work
	TraceFile         string        // ndjson trace of every scheduler event; an earlier run's is moved to FILE.N
	Models            []ModelEntry  // registered at start
	ReadHeaderTimeout time.Duration
	IdleConnTimeout   time.Duration
	// AllowedHosts are Host names served besides localhost, 127.0.0.1,
	// [::1] and the listen host (name or name:port; "*": any Host, unsafe:
	// it re-opens DNS rebinding). CONTRACT.md err.host.
	AllowedHosts []string
	// AllowedOrigins are browser origins (scheme://host[:port]) trusted to
	// send state-changing requests from another site. CONTRACT.md err.origin.
	AllowedOrigins []string
	// TLSCert and TLSKey are PEM files (--tls-cert, --tls-key): both set,
	// every route is served over TLS (https:, and wss: for the realtime
	// clients that force it); tls.go.
	TLSCert, TLSKey string
	// MaxModels caps the registered models (0: unlimited); CONTRACT.md
	// err.max-models.
	MaxModels int

	// LiveInvariants checks the scheduler's invariants while serving, once
	// per LiveInvariants scheduler events (more apart with many models and
	// tickets: runtime.Options.LiveInvariants); violations are counted in
	// sluice_invariant_violations_total and logged. 0: off.
	LiveInvariants int

	// StateDir keeps the persistent registry (server/internal/registry): every
	// committed management change, restored at start; "" keeps nothing.
	StateDir string

	// The serving edge (CONTRACT.md "Connections and request bodies").
	//
	// WriteTimeout: a client that accepts no bytes of a response for this
	// long is dropped and its lease released (edge.write-timeout); every
	// write to the socket gets a deadline this far out. 0: none.
	WriteTimeout time.Duration
	// BodyReadTimeout bounds the reading of a whole request body
	// (edge.body-timeout); MinBodyRate (bytes/s) is the slowest body
	// accepted once BodyRateGrace has passed (edge.body-min-rate). Both are
	// 408 request_timeout and close the connection. 0: none.
	BodyReadTimeout time.Duration
	MinBodyRate     int64
	BodyRateGrace   time.Duration
	// MaxConns bounds the open connections (edge.conn-limit): 0 derives it
	// from RLIMIT_NOFILE (the soft limit less 64, at least 16); negative:
	// no limit.
	MaxConns int
	// MaxJSONBody bounds JSON request bodies (413 over it).
	MaxJSONBody int64
	// SpoolThreshold: uploads longer than this go to a temporary file in
	// SpoolDir ("": os.TempDir()) instead of memory (edge.upload-spool).
	SpoolThreshold int64
	SpoolDir       string
	// BodyBudget bounds the body bytes held in memory by requests in
	// flight (the first SpoolThreshold bytes of each body) and SpoolBudget
	// the rest, on disk; a body that does not fit is 503 server_busy at
	// once (edge.body-budget). 0: unlimited.
	BodyBudget  int64
	SpoolBudget int64

	// Live sessions (GET /v1/realtime; CONTRACT.md "Live sessions").
	//
	// RealtimeIdle: a session whose client sends no message for this long
	// is closed (live.limits; 0: never). RealtimeMaxSession: the longest
	// session (live.limits; 0: unbounded). RealtimeDrain: how long a
	// session goes on once a manager waits on its model, before it is
	// closed with 1012 (live.drain-unload). RealtimeBuffer: the audio a
	// session may hold not yet decoded; past it the server stops reading
	// the socket (live.backpressure). RealtimeMaxRate: audio seconds a
	// client may send per wall-clock second, beyond a burst of
	// RealtimeBuffer (live.limits; 0: unchecked). RealtimeVADModel: the VAD
	// model of server_vad turn detection when the session names none
	// (live.turn-detection).
	RealtimeIdle       time.Duration
	RealtimeMaxSession time.Duration
	RealtimeDrain      time.Duration
	RealtimeBuffer     time.Duration
	RealtimeMaxRate    float64
	RealtimeVADModel   string

	_ struct{}
}

// ModelSpec is the body of PUT /v1/models/{id} and an entry of the
// startup config file (server/internal/modelspec).
type ModelSpec = modelspec.Spec

// ModelEntry is one model of the startup config file.
type ModelEntry = modelspec.Entry

// DecodeModelSpec decodes a model spec (the JSON body of PUT
// /v1/models/{id}) strictly: unknown fields and trailing data are errors.
func DecodeModelSpec(b []byte, s *ModelSpec) error { return httpapi.DecodeJSON(b, s) }

// DefaultMaxModels is the default of --max-models.
const DefaultMaxModels = 1024

// DefaultLiveInvariants is the default of --live-invariants: one full
// invariant check per 256 scheduler events (with up to 8 models and tickets).
const DefaultLiveInvariants = 256

// DefaultConfig returns the defaults of `sluice serve`.
func DefaultConfig() Config {
	return Config{
		Listen:             "127.0.0.1:8080",
		MaxBody:            25 << 20,
		ModelsRoot:         "models",
		ReadHeaderTimeout:  10 * time.Second,
		IdleConnTimeout:    120 * time.Second,
		ShutdownTimeout:    30 * time.Second,
		MaxModels:          DefaultMaxModels,
		LiveInvariants:     DefaultLiveInvariants,
		WriteTimeout:       30 * time.Second,
		BodyReadTimeout:    60 * time.Second,
		MinBodyRate:        1 << 10,
		BodyRateGrace:      10 * time.Second,
		MaxJSONBody:        1 << 20,
		SpoolThreshold:     1 << 20,
		BodyBudget:         256 << 20,
		SpoolBudget:        4 << 30,
		LoadBackoff:        time.Second,
		LoadBackoffMax:     time.Minute,
		RealtimeIdle:       time.Minute,
		RealtimeMaxSession: 30 * time.Minute,
		RealtimeDrain:      10 * time.Second,
		RealtimeBuffer:     10 * time.Second,
		RealtimeMaxRate:    8,
	}
}

// LoadModelsFile reads the models to register at start from a YAML file
// (modelspec.LoadFile).
func LoadModelsFile(path string) ([]ModelEntry, error) { return modelspec.LoadFile(path) }

// ParseModelsYAML parses the YAML of a models file (modelspec.ParseYAML).
func ParseModelsYAML(b []byte) ([]ModelEntry, error) { return modelspec.ParseYAML(b) }
