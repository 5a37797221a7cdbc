package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The persistent registry of --state-dir (CONTRACT.md, "Restarts and the
// persistent registry"): every committed management change (registrations,
// committed reconfigurations with their config_version, loads and unloads
// as the desired state, the models root) is written to one snapshot file
// before the change is answered 200, and restored at the next start.
//
// File format: one header line, then the JSON body of exactly len bytes:
//
//	sluice-registry 1 crc32c=0123abcd len=123
//	{"models_root":"...","models":[{"id":"a","config_version":3,"loaded":true,...}]}
//
// The format number changes with any incompatible change of the body; the
// CRC32C (Castagnoli) covers the body. Every change rewrites the whole
// snapshot: write a temporary file, fsync it, rename it over the old one,
// fsync the directory. A crash at any instant leaves the old snapshot or
// the new one, never a mix; a torn temporary file is what kill -9 can leave
// behind, and it is removed at the next start with a WARN. Anything else
// that does not parse is a startup error naming the file, never a silent
// reset. A snapshot costs O(registered models), which --max-models bounds,
// and is written only on a change.
//
// Two servers never share a state dir: the first holds an exclusive flock
// on <dir>/lock for its lifetime, and the second fails to start.
//
// Threading rule: mu serialises every change and write; it is taken before
// the runtime's lock (ConfigOf) and never the other way round.

const (
	registryName   = "registry.json"
	registryLock   = "lock"
	registryTemp   = registryName + ".tmp"
	registryFormat = 1
	registryMagic  = "sluice-registry"
	// maxRegistryBytes bounds what a start reads: far above what
	// --max-models registrations need, far below memory trouble.
	maxRegistryBytes = 64 << 20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// registryState is the body of the snapshot.
type registryState struct {
	ModelsRoot string          `json:"models_root,omitempty"` // "" until PUT /v1/settings/models-root
	Models     []registryModel `json:"models"`                // in registration order
}

// registryModel is one model's committed config, its config_version and
// its desired state.
type registryModel struct {
	ID            string          `json:"id"`
	ConfigVersion uint64          `json:"config_version"`
	Loaded        bool            `json:"loaded"` // desired: loaded again at start
	Task          string          `json:"task"`
	Engine        string          `json:"engine"`
	Checkpoint    string          `json:"checkpoint"` // as resolved at commit (absolute under a models root)
	Options       json.RawMessage `json:"options"`
	Slots         int             `json:"slots"`
	// AdmissionTimeoutNS is core.Config.AdmissionTimeout: -1 the server
	// default, 0 unbounded.
	AdmissionTimeoutNS int64 `json:"admission_timeout_ns"`
	MaxQueue           int   `json:"max_queue"`
	// Unregistered marks the tombstone of a model DELETE /v1/models/{id}
	// removed: ConfigVersion is the last version it had, the config fields
	// are empty, and a start restores it as a tombstone (never loaded,
	// never listed), so that a registration of the ID starts past that
	// version (CONTRACT.md unreg.persisted).
	Unregistered bool `json:"unregistered,omitempty"`
}

func recordOf(id string, c *core.Config, version uint64, loaded bool) registryModel {
	return registryModel{ID: id, ConfigVersion: version, Loaded: loaded, Task: c.Task, Engine: c.Engine,
		Checkpoint: c.Checkpoint, Options: json.RawMessage(c.Options), Slots: c.Slots,
		AdmissionTimeoutNS: c.AdmissionTimeout, MaxQueue: c.MaxQueue}
}

func (m *registryModel) equal(o *registryModel) bool {
	return m.ID == o.ID && m.ConfigVersion == o.ConfigVersion && m.Loaded == o.Loaded && m.Task == o.Task &&
		m.Engine == o.Engine && m.Checkpoint == o.Checkpoint && bytes.Equal(m.Options, o.Options) &&
		m.Slots == o.Slots && m.AdmissionTimeoutNS == o.AdmissionTimeoutNS && m.MaxQueue == o.MaxQueue &&
		m.Unregistered == o.Unregistered
}

// runtimeSpec is the spec that registers the model again, unloaded, at its
// recorded config_version.
func (m *registryModel) runtimeSpec() runtime.ModelSpec {
	spec := runtime.SpecOf(&core.Config{Engine: m.Engine, Checkpoint: m.Checkpoint, Task: m.Task, Slots: m.Slots,
		Options: string(m.Options), AdmissionTimeout: m.AdmissionTimeoutNS, MaxQueue: m.MaxQueue})
	spec.BaseVersion, spec.RegisterOnly = m.ConfigVersion, true
	return spec
}

// registry is an open state dir: its lock and the last durable state.
type registry struct {
	dir  string
	file string
	lock *os.File

	mu sync.Mutex
	st registryState // what is on disk
	// writeFile writes the temporary snapshot (tests replace it to tear a
	// write).
	writeFile func(f *os.File, b []byte) error
}

// openRegistry creates dir if needed, takes its lock and reads its
// snapshot (none: an empty registry).
func openRegistry(dir string, log *slog.Logger) (*registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	lock, err := lockDir(filepath.Join(dir, registryLock))
	if err != nil {
		return nil, err
	}
	g := &registry{dir: dir, file: filepath.Join(dir, registryName), lock: lock,
		writeFile: func(f *os.File, b []byte) error { _, err := f.Write(b); return err }}
	tmp := filepath.Join(dir, registryTemp)
	if err := os.Remove(tmp); err == nil {
		log.Warn("state dir: removed an unfinished snapshot left by a crash; the last complete one is kept", "file", tmp)
	} else if !errors.Is(err, fs.ErrNotExist) {
		_ = g.close()
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	st, err := readRegistry(g.file)
	if err != nil {
		_ = g.close()
		return nil, err
	}
	g.st = st
	return g, nil
}

// readRegistry parses a snapshot file; a missing file is an empty state.
func readRegistry(path string) (registryState, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return registryState{Models: []registryModel{}}, nil
	}
	if err != nil {
		return registryState{}, fmt.Errorf("state file %s: %w", path, err)
	}
	defer f.Close()
	b, err := readBounded(f, maxRegistryBytes)
	if err != nil {
		return registryState{}, fmt.Errorf("state file %s: %w", path, err)
	}
	st, err := parseRegistry(b)
	if err != nil {
		return registryState{}, fmt.Errorf("state file %s is corrupt (%w); it is kept as it is: repair or remove it to start", path, err)
	}
	return st, nil
}

func readBounded(f *os.File, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// encodeRegistry is the file's bytes for st.
func encodeRegistry(st registryState) ([]byte, error) {
	if st.Models == nil {
		st.Models = []registryModel{}
	}
	body, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	out := fmt.Appendf(nil, "%s %d crc32c=%08x len=%d\n", registryMagic, registryFormat, crc32.Checksum(body, crc32c), len(body))
	return append(out, body...), nil
}

// parseRegistry checks the header, the length and the checksum, then
// decodes the body strictly.
func parseRegistry(b []byte) (registryState, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || nl > 200 {
		return registryState{}, errors.New("no header line")
	}
	var format, n int
	var sum uint32
	var magic string
	if _, err := fmt.Sscanf(string(b[:nl]), "%s %d crc32c=%x len=%d", &magic, &format, &sum, &n); err != nil || magic != registryMagic {
		return registryState{}, fmt.Errorf("bad header %q", b[:nl])
	}
	if format != registryFormat {
		return registryState{}, fmt.Errorf("format %d, this build reads format %d", format, registryFormat)
	}
	body := b[nl+1:]
	if len(body) != n {
		return registryState{}, fmt.Errorf("body is %d bytes, the header says %d", len(body), n)
	}
	if got := crc32.Checksum(body, crc32c); got != sum {
		return registryState{}, fmt.Errorf("checksum mismatch: crc32c %08x, the header says %08x", got, sum)
	}
	var st registryState
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return registryState{}, fmt.Errorf("body: %w", err)
	}
	seen := map[string]bool{}
	for k, m := range st.Models {
		if err := validModelID(m.ID); err != nil {
			return registryState{}, fmt.Errorf("model %d: %w", k, err)
		}
		if seen[m.ID] {
			return registryState{}, fmt.Errorf("model %q listed twice", m.ID)
		}
		seen[m.ID] = true
		if m.ConfigVersion < 1 { // the upper bound is the spec validator's, at restore
			return registryState{}, fmt.Errorf("model %q: config_version must be at least 1", m.ID)
		}
	}
	if st.Models == nil {
		st.Models = []registryModel{}
	}
	return st, nil
}

// write makes st durable, then adopts it. On any failure the file and the
// adopted state stay as they were.
func (g *registry) write(st registryState) error {
	b, err := encodeRegistry(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(g.dir, registryTemp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	err = g.writeFile(f, b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, g.file)
	}
	if err == nil {
		err = syncDir(g.dir)
	}
	if err != nil {
		return fmt.Errorf("state: writing %s: %w", g.file, err)
	}
	g.st = st
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// locked runs update under the registry's lock; without a state dir (g
// nil) it does nothing.
func (g *registry) locked(change func(st *registryState) bool) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.update(change)
}

// update applies change to a copy of the durable state and writes it when
// it differs. A change that is already durable writes nothing.
func (g *registry) update(change func(st *registryState) bool) error {
	st := registryState{ModelsRoot: g.st.ModelsRoot, Models: append([]registryModel(nil), g.st.Models...)}
	if !change(&st) {
		return nil
	}
	return g.write(st)
}

// put records m, replacing the record of its ID or appending it.
func (st *registryState) put(m registryModel) bool {
	for k := range st.Models {
		if st.Models[k].ID == m.ID {
			if st.Models[k].equal(&m) {
				return false
			}
			st.Models[k] = m
			return true
		}
	}
	st.Models = append(st.Models, m)
	return true
}

func (st *registryState) get(id string) (registryModel, bool) {
	for _, m := range st.Models {
		if m.ID == id {
			return m, true
		}
	}
	return registryModel{}, false
}

// close releases the lock.
func (g *registry) close() error {
	if g == nil || g.lock == nil {
		return nil
	}
	err := g.lock.Close() // closing the descriptor releases the flock
	g.lock = nil
	return err
}

// recordModels makes the committed state of every model of ids durable:
// its committed config, config_version and desired residency as the
// runtime has them now (the change's own or a later one, never an older
// one). The desired residency is the core's (ModelStatus.WantLoaded: what
// the last successful manager on the model left), not the handler's, so
// two changes of one model that overlap in time are recorded in the order
// the model's queue ran them, whichever handler writes last. It runs
// before the change is answered (CONTRACT.md persist.durable-before-200).
// An ID that is not registered (a bulk's not_found) is skipped.
func (s *Server) recordModels(ids []string) error {
	return s.reg.locked(func(st *registryState) bool {
		changed := false
		for _, id := range ids {
			cfg, status, err := s.rt.ConfigOf(id)
			if err != nil {
				continue
			}
			if old, known := st.get(id); known && old.ConfigVersion > status.ConfigVersion {
				continue // never backwards (the live version only grows)
			}
			if st.put(recordOf(id, &cfg, status.ConfigVersion, status.WantLoaded)) {
				changed = true
			}
		}
		return changed
	})
}

// recordUnregistered makes model id's tombstone durable at config version
// version, before DELETE /v1/models/{id} is answered (CONTRACT.md
// unreg.persisted, persist.durable-before-200). A registration of the ID
// that already committed a later version (a PUT that ran right after the
// unregister) is left as it is: the record never goes backwards.
func (s *Server) recordUnregistered(id string, version uint64) error {
	return s.reg.locked(func(st *registryState) bool {
		if old, known := st.get(id); known && old.ConfigVersion > version {
			return false
		}
		if _, _, err := s.rt.ConfigOf(id); err == nil {
			return false // registered again since: recordModels records that
		}
		return st.put(registryModel{ID: id, ConfigVersion: version, Unregistered: true, Options: json.RawMessage("{}")})
	})
}

// recordModelsRoot makes a new models root durable; it runs inside the
// root's swap, before the swap (CONTRACT.md persist.models-root).
func (s *Server) recordModelsRoot(root string) error {
	return s.reg.locked(func(st *registryState) bool {
		if st.ModelsRoot == root {
			return false
		}
		st.ModelsRoot = root
		return true
	})
}

// notDurable is the answer to a change that is live but could not be
// written: 500, never a silent success.
func notDurable(err error) error {
	return &Error{Status: 500, Type: "internal_error",
		Message: "the change was applied but could not be made durable in --state-dir; it will not survive a restart", Err: err}
}

// restoreRegistry registers every recorded model, unloaded, at its recorded
// config_version (CONTRACT.md persist.restore), and restores the tombstones
// of unregistered ones (unreg.persisted). A model that no longer
// validates (its engine not served, its checkpoint gone) is a startup
// error naming the state file.
func (s *Server) restoreRegistry() error {
	g := s.reg
	for _, m := range g.st.Models {
		if m.Unregistered {
			if err := s.rt.RestoreUnregistered(context.Background(), m.ID, m.ConfigVersion); err != nil {
				return fmt.Errorf("state file %s: restoring the tombstone of model %q: %w", g.file, m.ID, err)
			}
			s.restored[m.ID] = false // known to the state dir: a startup config does not bring it back
			continue
		}
		if _, err := s.rt.Apply(context.Background(), m.ID, m.runtimeSpec()); err != nil {
			return fmt.Errorf("state file %s: restoring model %q: %w", g.file, m.ID, err)
		}
		s.created.note(m.ID, time.Now())
		s.restored[m.ID] = m.Loaded
		s.log.Info("model restored from the state dir", "model", m.ID, "config_version", m.ConfigVersion, "loaded", m.Loaded)
	}
	return nil
}

// rotateTrace moves a non-empty trace of an earlier run aside to the first
// free path.N (N from 1), so the new run's trace starts from an empty
// machine as spec/cmd/tracecheck requires: concatenated runs re-register
// models and reuse tickets, which no single spec behaviour explains
// (CONTRACT.md persist.trace-kept).
func rotateTrace(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Size() == 0 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for n := 1; n <= maxRotatedTraces; n++ {
		to := fmt.Sprintf("%s.%d", path, n)
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(path, to); err != nil {
				return "", err
			}
			return to, nil
		}
	}
	return "", fmt.Errorf("%s.1 to %s.%d all exist; remove old traces", path, path, maxRotatedTraces)
}

const maxRotatedTraces = 1000
