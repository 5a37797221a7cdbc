package conformance

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is one matrix file (matrices/<matrix>.yaml).
type File struct {
	// Matrix is the cell-ID prefix of the matrix ("ops", "two", ...).
	Matrix string `yaml:"matrix"`
	// Title is the matrix's heading in CONTRACT.md.
	Title string `yaml:"title"`
	// Situations are named step lists that cases inline with
	// `- situation: NAME`; they are written with the same symbols as the
	// cases that use them.
	Situations map[string][]Step `yaml:"situations"`
	// Cases are the file's test cases, each a test of its own.
	Cases []Case `yaml:"cases"`
	// Areas are cells whose label is derived from other cells (CONTRACT.md
	// "Validation by area": an area is as strong as its weakest cell).
	Areas map[string]Area `yaml:"areas"`

	name string // file name, for messages
}

// Case is one test: a start situation, operations in arrival order and
// what must be observed. Model and gate names in a case are symbols; the
// runner maps them to IDs unique to the run and the case.
type Case struct {
	// Name is the case's unique name, usually its main cell ID; it names
	// the Go subtest (TestConformance/<Name>) and the report's row.
	Name string `yaml:"name"`
	// Covers lists the cells this case exercises fully (label D).
	Covers []string `yaml:"covers"`
	// Partial lists the cells this case exercises partially (label P).
	Partial []string `yaml:"partial"`
	// Missing says, for Partial cells, what the case does not check.
	Missing string `yaml:"missing"`
	// Note, when set, is a short remark that CONTRACT.md's Test column
	// shows after the case's name for the cells it covers: evidence a
	// reader would not expect from the steps alone (a situation argued
	// rather than set up, say).
	Note string `yaml:"note"`
	// Server, when set, runs the case on its own server started with these
	// settings (residency limits, timeouts, shutdown, modes).
	Server *ServerSpec `yaml:"server"`
	// Runtime, instead of Steps, names a check that drives core/runtime
	// directly in the runner's own process, without HTTP (runtimeChecks):
	// the runtime as a library under a caller other than Sluice's server.
	Runtime string `yaml:"runtime"`
	// Steps are run in order.
	Steps []Step `yaml:"steps"`

	file  string
	index int
}

// Area derives one cell's label from the cells its scope rests on: the
// weakest of them, capped at Cap (P or U) when part of the scope lies
// outside the suite, as Why says.
//
// Part of an area's scope may rest elsewhere without capping it: GPU names
// the GPU-only cells that hold what only a device can show (labelled on
// their own, never D without one), GPUWhy what that part is; External names
// tests outside this suite that exercise the rest (the real engines'
// suites), each "DIR TestName" (a Go test in that package folder) or
// "make TARGET"; a test checks that each still exists.
type Area struct {
	Cells    []string `yaml:"cells"`
	Cap      string   `yaml:"cap"`
	Why      string   `yaml:"why"`
	GPU      []string `yaml:"gpu"`
	GPUWhy   string   `yaml:"gpu_why"`
	External []string `yaml:"external"`
}

// ServerSpec are the settings of a server the runner starts for one case:
// the flags of `sluice serve`. Unset booleans ParallelJobs, UIManagement
// and Fixture default to true.
type ServerSpec struct {
	ParallelJobs       *bool  `yaml:"parallel_jobs"`
	UIManagement       *bool  `yaml:"ui_management"`
	Fixture            *bool  `yaml:"fixture"`
	APIKey             string `yaml:"api_key"`
	ManagementKey      string `yaml:"management_key"`
	SignInLimit        int    `yaml:"sign_in_limit"`
	MaxLoadedModels    int    `yaml:"max_loaded_models"`
	MemoryBudgetMB     int64  `yaml:"memory_budget_mb"`
	IdleTimeoutMS      int64  `yaml:"idle_timeout_ms"`
	AdmissionTimeoutMS int64  `yaml:"admission_timeout_ms"`
	AdmissionCeilingMS int64  `yaml:"admission_ceiling_ms"`
	SerializeColdLoads bool   `yaml:"serialize_cold_loads"`
	// LoadBackoffMS is --load-backoff in milliseconds (0: the server's
	// default, 1 s; -1: none) and LoadBackoffMaxMS its cap (0: default).
	LoadBackoffMS    int64 `yaml:"load_backoff_ms"`
	LoadBackoffMaxMS int64 `yaml:"load_backoff_max_ms"`
	// ShutdownTimeoutMS is --shutdown-timeout; 0 means the runner's default
	// (10 s), -1 means none (wait for finite work).
	ShutdownTimeoutMS int64 `yaml:"shutdown_timeout_ms"`
	MaxBody           int64 `yaml:"max_body"`
	// MaxModels is --max-models (unset: the server's default; 0: unlimited).
	MaxModels *int `yaml:"max_models"`
	// AllowedHosts and AllowedOrigins are --allowed-hosts and
	// --allowed-origins (CONTRACT.md err.host, err.origin).
	AllowedHosts   []string `yaml:"allowed_hosts"`
	AllowedOrigins []string `yaml:"allowed_origins"`
	// The serving edge (CONTRACT.md edge.*): --read-header-timeout,
	// --idle-conn-timeout, --write-timeout, --body-read-timeout,
	// --min-body-rate, --body-rate-grace, --max-conns, --max-json-body,
	// --spool-threshold, --body-budget, --spool-budget; 0 keeps the
	// server's default.
	ReadHeaderTimeoutMS int64 `yaml:"read_header_timeout_ms"`
	IdleConnTimeoutMS   int64 `yaml:"idle_conn_timeout_ms"`
	WriteTimeoutMS      int64 `yaml:"write_timeout_ms"`
	BodyReadTimeoutMS   int64 `yaml:"body_read_timeout_ms"`
	MinBodyRate         int64 `yaml:"min_body_rate"`
	BodyRateGraceMS     int64 `yaml:"body_rate_grace_ms"`
	MaxConns            int   `yaml:"max_conns"`
	MaxJSONBody         int64 `yaml:"max_json_body"`
	SpoolThreshold      int64 `yaml:"spool_threshold"`
	BodyBudget          int64 `yaml:"body_budget"`
	SpoolBudget         int64 `yaml:"spool_budget"`
	// Live sessions (CONTRACT.md "Live sessions"): --realtime-drain and
	// --realtime-idle; 0 keeps the server's default.
	RealtimeDrainMS int64 `yaml:"realtime_drain_ms"`
	RealtimeIdleMS  int64 `yaml:"realtime_idle_ms"`
	// Binary says the case needs a real process (signals); it is skipped
	// unless the runner has a binary (--binary, or the in-process test's
	// own build of cmd/sluice).
	Binary bool `yaml:"binary"`
	// Engines lists real engines (backends/engines: flite, pocketsphinx,
	// espeak, onnx, diarize) the server must serve beside the fixture, with the
	// runner's models root (Options.ModelsRoot, built by `make models`) as
	// --models-root. The case is skipped when that root is missing or, in
	// process, an engine's native library does not load.
	Engines []string `yaml:"engines"`
	// StateDir gives the server a --state-dir of the case's own, kept
	// across its restart steps (CONTRACT.md persist.*).
	StateDir bool `yaml:"state_dir"`
	// Trace turns on the server's --trace, written to trace.ndjson in the
	// case's folder (beside the state dir) and so kept across its restarts
	// (CONTRACT.md persist.trace-kept); it needs StateDir.
	Trace bool `yaml:"trace"`
	// SpoolDir makes the server's --spool-dir spool/ in the case's
	// folder (file steps can then see that no spooled upload is left
	// behind, CONTRACT.md edge.upload-spool); it needs StateDir.
	SpoolDir bool `yaml:"spool_dir"`
	// Startup lists the models of the server's startup config (--config),
	// each as in a config file (id, task, options, ...; engine fixture and
	// slots 1 unless given). Their IDs are model symbols, mapped like
	// every other (CONTRACT.md oip.ready).
	Startup []map[string]any `yaml:"startup"`

	trace      bool   // the server writes its scheduler trace (the case reads it: teardowns steps)
	keepTrace  string // where the trace and its options are copied when the server stops (TraceKeepEnv)
	modelsRoot string // the real engines' models root (Engines)
	stateDir   string // the case's state dir (StateDir), outside every server's own folder
	caseDir    string // the case's folder, holding stateDir (as state/) and a kept trace (file steps)
	spoolDir   string // the server's --spool-dir (SpoolDir: spool/ in caseDir)
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// Step is one step of a case: a mapping with exactly one key, the step's
// kind, whose value is decoded into that kind's argument type (stepKinds).
type Step struct {
	Kind string
	Arg  any
	Line int
	File string // the file the step is written in (a situation's file)
}

// UnmarshalYAML decodes a step strictly: one key, a known kind, and an
// argument without unknown fields.
func (s *Step) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return fmt.Errorf("line %d: a step is a mapping with exactly one key (its kind)", n.Line)
	}
	kind := n.Content[0].Value
	mk, ok := stepKinds[kind]
	if !ok {
		return fmt.Errorf("line %d: unknown step %q (known: %s)", n.Line, kind, strings.Join(stepKindNames(), ", "))
	}
	arg := mk()
	if err := decodeStrictNode(n.Content[1], arg); err != nil {
		return fmt.Errorf("line %d: step %s: %w", n.Line, kind, err)
	}
	s.Kind, s.Arg, s.Line = kind, arg, n.Line
	return nil
}

// decodeStrictNode decodes a node refusing unknown fields (yaml.Node.Decode
// has no strict mode, so the node is re-encoded and decoded strictly).
func decodeStrictNode(n *yaml.Node, out any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(out)
}

// stepKinds maps each step kind to a constructor of its argument.
var stepKinds = map[string]func() any{
	"situation":    func() any { return new(string) },
	"put":          func() any { return new(PutStep) },
	"infer":        func() any { return new(InferStep) },
	"load":         func() any { return new(TargetStep) },
	"unload":       func() any { return new(TargetStep) },
	"bulk":         func() any { return new(BulkStep) },
	"http":         func() any { return new(HTTPStep) },
	"open":         func() any { return new(string) },
	"await_gate":   func() any { return new(GateStep) },
	"model":        func() any { return new(ModelExpect) },
	"await_model":  func() any { return new(ModelExpect) },
	"absent":       func() any { return new(string) },
	"list":         func() any { return new(ListStep) },
	"pending":      func() any { return new([]string) },
	"await":        func() any { return new(AwaitStep) },
	"await_chunks": func() any { return new(ChunkStep) },
	"disconnect":   func() any { return new(string) },
	"shutdown":     func() any { return new(ShutdownStep) },
	"exited":       func() any { return new(ExitStep) },
	"refused":      func() any { return new(bool) },
	"log":          func() any { return new(LogStep) },
	"stall":        func() any { return new(StallStep) },
	"sessions":     func() any { return new(int) },
	"signal":       func() any { return new(string) },
	"teardowns":    func() any { return new(TeardownStep) },
	"folder":       func() any { return new(FolderStep) },
	"restart":      func() any { return new(RestartStep) },
	"stop":         func() any { return new(StopStep) },
	"start":        func() any { return new(StartStep) },
	"use":          func() any { return new(string) },
	"file":         func() any { return new(FileStep) },
	"crash_loop":   func() any { return new(CrashLoopStep) },
	"repeat":       func() any { return new(RepeatStep) },
}

// RepeatStep is its steps written Times times in a row (the loader
// inlines them, as it does situations): steps that change a model over
// and over, to grow its server's journal. Calls inside are synchronous,
// since a call's name is given once.
type RepeatStep struct {
	Times int    `yaml:"times"`
	Steps []Step `yaml:"steps"`
}

// RestartStep stops the case's own server and starts it again with the
// same flags and state dir: cleanly (SIGTERM, or in process the shutdown
// a signal begins), or with kill: true by SIGKILL, which needs a binary.
// Later steps talk to the new server.
type RestartStep struct {
	Kill bool `yaml:"kill"`
}

func stepKindNames() []string { return slices.Sorted(maps.Keys(stepKinds)) }

// Call is what every step that sends a request shares: `as` makes it
// asynchronous (the case goes on at once and later steps refer to the call
// by that name); without it the step waits for the answer and checks
// `expect` (default: status 200).
type Call struct {
	As     string  `yaml:"as"`
	Expect *Expect `yaml:"expect"`
}

// Expect is what an answer must show. Unset fields are not checked.
type Expect struct {
	// Status is the HTTP status (default 200 where an Expect is implied).
	Status int `yaml:"status"`
	// Error is the error body's type (invalid_request_error, server_busy, ...).
	Error string `yaml:"error"`
	// RetryAfter checks that a Retry-After header is present (true) or absent.
	RetryAfter *bool `yaml:"retry_after"`
	// Body is a subset of the JSON answer: objects match by key, arrays
	// exactly, strings equal to a model symbol match its ID.
	Body map[string]any `yaml:"body"`
	// Chunks is the number of data events of a stream before [DONE].
	Chunks *int `yaml:"chunks"`
	// Done says the stream ended with `data: [DONE]` (true) or without it.
	Done *bool `yaml:"done"`
	// ErrorEvent says the stream carried an `event: error`.
	ErrorEvent *bool `yaml:"error_event"`
	// Header are header values the answer must carry.
	Header map[string]string `yaml:"header"`
	// WithinMS bounds the time from sending the request to its answer.
	WithinMS int64 `yaml:"within_ms"`
	// Disconnected: the client gave up (disconnect step); no answer read.
	Disconnected bool `yaml:"disconnected"`
	// Failed: the exchange failed at the transport level (connection
	// refused or closed by the server without an answer).
	Failed bool `yaml:"failed"`
	// Any accepts whatever became of the exchange (an answer or a
	// transport failure), as long as the client did not disconnect.
	Any bool `yaml:"any"`
	// Exact makes Body an exact match of the whole JSON answer.
	Exact bool `yaml:"exact"`
	// Items: the answer is a JSON array with, for each item, an element
	// the item is a subset of (other elements allowed: a shared server
	// lists other cases' models too).
	Items []any `yaml:"items"`
	// Text: the answer's body contains each of these lines ($SYM mapped),
	// for answers that are not JSON (/metrics).
	Text []string `yaml:"text"`
}

// PutStep sends PUT /v1/models/{model}: register or reconfigure. The spec
// defaults to engine fixture and task tts; slots is sent only when given
// (so `slots: null` sends null), options with gate names mapped.
type PutStep struct {
	Model              string         `yaml:"model"`
	Engine             *string        `yaml:"engine"`
	Task               *string        `yaml:"task"`
	Checkpoint         *string        `yaml:"checkpoint"`
	Slots              yaml.Node      `yaml:"slots"`
	Options            map[string]any `yaml:"options"`
	AdmissionTimeoutMS *int64         `yaml:"admission_timeout_ms"`
	MaxQueue           *int           `yaml:"max_queue"`
	// Aliases are model symbols, mapped like the model's own (nil: none
	// sent; an empty list is sent empty).
	Aliases []string `yaml:"aliases"`
	// Raw replaces the JSON body (symbols written $NAME are mapped).
	Raw  string `yaml:"raw"`
	Call `yaml:",inline"`
}

// InferStep sends POST /v1/models/{model}/infer. Input gate and chunk_gate
// names are mapped like every gate.
type InferStep struct {
	Model   string         `yaml:"model"`
	Input   map[string]any `yaml:"input"`
	Stream  bool           `yaml:"stream"`
	Timeout *int64         `yaml:"timeout_ms"`
	// HeaderTimeout sets the Sluice-Admission-Timeout-Ms header.
	HeaderTimeout *string `yaml:"header_timeout_ms"`
	Call          `yaml:",inline"`
}

// TargetStep is load or unload of one model.
type TargetStep struct {
	Model string `yaml:"model"`
	Call  `yaml:",inline"`
}

// BulkStep sends POST /v1/models/unload with the mapped IDs.
type BulkStep struct {
	Models []string `yaml:"models"`
	Call   `yaml:",inline"`
}

// HTTPStep is any request: method, path (symbols written $NAME mapped),
// a raw body, a JSON body or a generated audio body, headers (a list value
// is sent as that many header lines). Via "handler" it goes to the
// in-process server's handler instead of the listener (the window after
// the listener closed; in-process only). Jar names a cookie jar of the
// case, like one browser: the step sends the cookies the jar holds and
// keeps those its answer sets (a synchronous step only); with KeepJar the
// jar stays as it was, as a copy of the cookies taken before the step would.
// Chunked sends the body without a Content-Length, as one of unknown
// length (Transfer-Encoding: chunked), which the server accounts as it
// arrives (CONTRACT.md edge.body-budget). SendFirst and PauseMS make a
// slow client: the body's first SendFirst bytes go at once, the rest
// PauseMS later (the pause is the client's behaviour, not an ordering:
// CONTRACT.md edge.body-min-rate's deadline moves with the bytes received).
type HTTPStep struct {
	Method    string                  `yaml:"method"`
	Path      string                  `yaml:"path"`
	Body      string                  `yaml:"body"`
	JSON      any                     `yaml:"json"`
	Audio     *AudioBody              `yaml:"audio"`
	Headers   map[string]HeaderValues `yaml:"headers"`
	Via       string                  `yaml:"via"`
	Jar       string                  `yaml:"jar"`
	KeepJar   bool                    `yaml:"keep_jar"`
	Chunked   bool                    `yaml:"chunked"`
	SendFirst int                     `yaml:"send_first"`
	PauseMS   int64                   `yaml:"pause_ms"`
	Call      `yaml:",inline"`
}

// AudioBody is a generated audio request body (binary, so a YAML string
// cannot carry it): Seconds of a 300 Hz tone as mono PCM16 at Rate, in a
// WAV file, or with Raw the bare PCM16LE samples. StatedSeconds, when set,
// is the duration the WAV header's data size states instead of the real
// one: a header claiming more than the body holds. Format "flac", "mp3",
// "opus" or "aac" encodes the tone in that format instead (libsndfile, aac
// FFmpeg's ADTS; opus, mp3 and aac at a rate the codec takes, resampled
// from Rate); "webm" (Opus at 48 kHz with no duration, as MediaRecorder
// writes) and "m4a" (AAC) in those containers, with FFmpeg.
type AudioBody struct {
	Rate          int     `yaml:"rate"`
	Seconds       float64 `yaml:"seconds"`
	StatedSeconds float64 `yaml:"stated_seconds"`
	Raw           bool    `yaml:"raw"`
	Format        string  `yaml:"format"`
	// Tensor (INT16 or FP32) sends the samples as the JSON body of an
	// inference-protocol infer: one "audio" input of shape [n] with the
	// rate as the request's sample_rate parameter.
	Tensor string `yaml:"tensor"`
}

// HeaderValues are one header's values: a string, or a list of them.
type HeaderValues []string

// UnmarshalYAML reads a scalar as one value and a sequence as several.
func (h *HeaderValues) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*h = HeaderValues{n.Value}
		return nil
	}
	var vs []string
	if err := n.Decode(&vs); err != nil {
		return fmt.Errorf("header values: %w", err)
	}
	*h = vs
	return nil
}

// GateStep waits until exactly Waiting steps wait at Gate (default 1).
type GateStep struct {
	Gate    string `yaml:"gate"`
	Waiting *int   `yaml:"waiting"`
}

// ModelExpect is a subset of a model object, keyed like the JSON (state,
// loaded, slots, active_slots, queued_requests, queued_managers,
// max_parallel_slots, config_version, task, engine, load_failures,
// backing_off), plus `model`.
type ModelExpect map[string]any

// ListStep checks GET /v1/models: the models listed (in registration
// order, among this case's symbols) and those absent.
type ListStep struct {
	Has    []string `yaml:"has"`
	Absent []string `yaml:"absent"`
}

// AwaitStep waits for an asynchronous call and checks its answer.
type AwaitStep struct {
	Call   string `yaml:"call"`
	Expect `yaml:",inline"`
}

// ChunkStep waits until a streamed call has received N data events.
type ChunkStep struct {
	Call string `yaml:"call"`
	N    int    `yaml:"n"`
}

// ShutdownStep begins the shutdown of the case's own server: in-process
// the equivalent of the first signal, with a binary SIGTERM (or Signal).
type ShutdownStep struct {
	Signal string `yaml:"signal"` // TERM (default) or INT; binary only matters
}

// ExitStep waits for the case's own server to exit. MinMS and MaxMS bound
// the time since the shutdown began; Error says Shutdown reported a
// passed deadline (in-process) or a non-zero exit (binary).
type ExitStep struct {
	MinMS int64 `yaml:"min_ms"`
	MaxMS int64 `yaml:"max_ms"`
	Error *bool `yaml:"error"`
}

// LogStep checks the case's own server's log: Contains must occur Count
// times (default: at least once).
type LogStep struct {
	Contains string `yaml:"contains"`
	Count    *int   `yaml:"count"`
	Absent   bool   `yaml:"absent"`
}

// StallStep opens a raw connection that stalls: "header" (a partial
// request header), "body" (a header announcing a body never sent),
// "unread" (a streamed inference whose answer is never read; needs Model),
// "idle" (two keep-alive GET /healthz sent at once, both answered in full
// without Connection: close, else the step fails; then nothing more is
// sent, and the call fails when the server closes the connection).
type StallStep struct {
	As    string         `yaml:"as"`
	Kind  string         `yaml:"kind"`
	Model string         `yaml:"model"`
	Input map[string]any `yaml:"input"`
}

// TeardownStep checks the teardowns of one model in the case's own
// server's scheduler trace (--trace, which the runner turns on for the
// case): Causes is the exact list of their causes so far, in order (unload,
// reconfigure, evict, idle, shutdown, failed_load). It waits until that
// many teardowns started, then requires the list to match; a later step
// can check that no further one came. Over HTTP alone an idle retirement
// and a shutdown's teardown look alike.
type TeardownStep struct {
	Model  string   `yaml:"model"`
	Causes []string `yaml:"causes"`
}

// FolderStep makes a models-root folder on the runner's machine (so only
// for a case with its own server, which runs there) holding fixture
// checkpoints; $NAME (As) in raw paths, bodies and JSON strings names its
// path. It is removed when the case ends.
type FolderStep struct {
	As          string             `yaml:"as"`
	Checkpoints []FolderCheckpoint `yaml:"checkpoints"`
}

// FolderCheckpoint is one checkpoint folder: its manifest names the
// fixture engine (default), a task (default tts) and default options.
type FolderCheckpoint struct {
	Name    string         `yaml:"name"`
	Engine  string         `yaml:"engine"`
	Task    string         `yaml:"task"`
	Options map[string]any `yaml:"options"`
}
