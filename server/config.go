package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the server's configuration: what `sluice serve` flags set.
type Config struct {
	Listen          string        // default 127.0.0.1:8080
	ParallelJobs    bool          // the parallel runtime; without it the legacy single-session mode
	UIManagement    bool          // management endpoints enabled
	Fixture         bool          // the fixture engine and /v1/fixture endpoints
	APIKey          string        // Bearer key for every endpoint but /healthz and /readyz
	ManagementKey   string        // Bearer key for management endpoints
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
	TraceFile         string        // ndjson trace of every scheduler event
	Models            []ModelEntry  // registered at start
	ReadHeaderTimeout time.Duration
	IdleConnTimeout   time.Duration

	_ struct{}
}

// ModelEntry is one model of the startup config file.
type ModelEntry struct {
	ID   string
	Spec ModelSpec
}

// DefaultConfig returns the defaults of `sluice serve`.
func DefaultConfig() Config {
	return Config{
		Listen:            "127.0.0.1:8080",
		MaxBody:           25 << 20,
		ModelsRoot:        "models",
		ReadHeaderTimeout: 10 * time.Second,
		IdleConnTimeout:   120 * time.Second,
		ShutdownTimeout:   30 * time.Second,
		LoadBackoff:       time.Second,
		LoadBackoffMax:    time.Minute,
	}
}

// fileConfig is the YAML of --config FILE:
//
//	models:
//	  - id: tts
//	    engine: fixture
//	    slots: 2
//	    options: {load_ms: 50}
type fileConfig struct {
	Models []map[string]any `yaml:"models"`
}

// LoadModelsFile reads the models to register at start from a YAML file.
func LoadModelsFile(path string) ([]ModelEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseModelsYAML(b)
}

// ParseModelsYAML parses the YAML of a models file; each entry is a model
// spec (the JSON body of PUT /v1/models/{id}) plus its id, decoded strictly.
func ParseModelsYAML(b []byte) ([]ModelEntry, error) {
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) { // an empty file lists no models
		return nil, fmt.Errorf("config: %w", err)
	}
	var out []ModelEntry
	seen := map[string]bool{}
	for k, m := range fc.Models {
		id, _ := m["id"].(string)
		if err := validModelID(id); err != nil {
			return nil, fmt.Errorf("config: model %d: %w", k, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("config: model %q listed twice", id)
		}
		seen[id] = true
		delete(m, "id")
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("config: model %q: %w", id, err)
		}
		var spec ModelSpec
		if err := decodeBytesStrict(bytes.NewReader(raw), &spec); err != nil {
			return nil, fmt.Errorf("config: model %q: %w", id, err)
		}
		out = append(out, ModelEntry{ID: id, Spec: spec})
	}
	return out, nil
}
