// Package registry is the persistent registry of --state-dir (CONTRACT.md,
// "Restarts and the persistent registry") and the management operations
// that change it: the runtime's Apply, Load, Unload, Unregister and
// BulkUnload, and the models root, each durable before it returns success
// (persist.durable-before-200), so a handler never records anything itself
// and never answers 200 for a change that is not durable.
//
// On disk: a snapshot and a journal. The snapshot, registry.json, is one
// header line and the JSON body of exactly len bytes:
//
//	sluice-registry 2 crc32c=0123abcd len=123
//	{"models_root":"...","journal":7,"models":[{"id":"a","config_version":3,"loaded":true,...}]}
//
// The journal, registry.journal, is a header line naming the snapshot it
// continues, then one record per change, each framed and checksummed:
//
//	sluice-journal 1 gen=7
//	r crc32c=89abcdef len=97
//	{"models":[{"id":"a","config_version":4,...}]}
//
// A record holds the new records of the models it changes (a bulk unload:
// all of its members, one record) and the new models root, if any; a later
// record of an ID replaces the earlier one. A change appends one record
// and fsyncs the journal: its cost does not depend on how many models are
// registered. When the journal grows past the snapshot's size (and
// compactMin), the state is compacted: a new snapshot with the next
// generation (temporary file, fsync, rename, fsync of the folder), then an
// empty journal of that generation the same way. A journal whose
// generation is not the snapshot's is what a crash between those two
// renames leaves: its records are all in the snapshot, and it is replaced.
//
// A crash at any instant leaves the last complete snapshot and a journal
// whose last record may be torn (fewer bytes than its header says, or a
// header line without its end): the torn record was never fsynced, so it
// was never answered 200, and it is cut off at the next start with a WARN
// naming the file (persist.atomic). A complete record whose checksum fails,
// a record that does not decode, and anything wrong with the snapshot are
// a startup error naming the file and the problem, and the files are left
// as they are (persist.corrupt). Format 1 snapshots (no journal) are read
// as generation 0.
//
// A reconfiguration is written before the runtime commits it, as an
// intent (a record's "intents": the record it will leave at the version it
// will commit; announce.go), so that a version the runtime shows is never
// given to another config after a failed write and a restart; a start
// rolls an unsettled intent forward (persist.version-continues).
//
// Two servers never share a state dir: the first holds an exclusive flock
// on <dir>/lock for its lifetime, and the second fails to start; a lock
// file removed or replaced under the first stops its writes (persist.lock).
// Nothing planted in the dir is followed or blocked on (files.go,
// persist.files).
package registry

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

const (
	snapshotName   = "registry.json"
	journalName    = "registry.journal"
	lockName       = "lock"
	tempSuffix     = ".tmp"
	snapshotFormat = 2
	snapshotMagic  = "sluice-registry"
	journalFormat  = 1
	journalMagic   = "sluice-journal"
	// maxStateBytes bounds what a start reads of each file: far above
	// what --max-models registrations need, far below memory trouble.
	maxStateBytes = 64 << 20
	// compactMin is the journal size under which it is never compacted.
	compactMin = 64 << 10
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Store is an open state dir: its lock, the recorded state and the journal
// open for appending. Its methods are safe for concurrent use; mu
// serialises every change and write, and is taken before the runtime's
// lock (Registry reads the runtime inside it), never the other way round.
type Store struct {
	dir  string
	log  *slog.Logger
	lock *os.File

	mu     sync.Mutex
	root   string
	gen    uint64
	models []Model
	index  map[string]int
	// intents are the announced, unsettled reconfigurations by ID
	// (State.Intents).
	intents map[string]Model
	jf      *os.File // the journal, open for appending; nil: rewrite it before the next append
	jsize   int64    // its bytes that are durable
	snap    int64    // the snapshot's size
	// write writes b to f (tests replace it to fail or tear a write).
	write func(f *os.File, b []byte) error
}

// Open creates dir if needed, takes its lock and reads its snapshot and
// journal (none: an empty state). A torn last journal record is cut off
// with a WARN; anything else that does not parse is an error naming the
// file, and the files are left as they are.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	lock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, log: log, lock: lock, index: map[string]int{}, intents: map[string]Model{}, write: writeAll}
	if err := s.open(); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func writeAll(f *os.File, b []byte) error { _, err := f.Write(b); return err }

func (s *Store) path(name string) string { return filepath.Join(s.dir, name) }

func (s *Store) open() error {
	for _, name := range []string{snapshotName + tempSuffix, journalName + tempSuffix} {
		tmp := s.path(name)
		removed, err := clearTemp(tmp)
		if err != nil {
			return err
		}
		if removed {
			s.log.Warn("state dir: removed an unfinished snapshot left by a crash; the last complete one is kept", "file", tmp)
		}
	}
	st, size, err := readSnapshot(s.path(snapshotName))
	if err != nil {
		return err
	}
	s.root, s.gen, s.snap = st.ModelsRoot, st.Journal, size
	for _, m := range st.Models {
		s.put(m)
	}
	for _, m := range st.Intents {
		s.intents[m.ID] = m
	}
	if err := s.openJournal(); err != nil {
		return err
	}
	for _, m := range s.rollForward() {
		s.log.Warn("state dir: a reconfiguration announced before a crash or a failed write is restored at the version it announced",
			"model", m.ID, "config_version", m.ConfigVersion)
	}
	return nil
}

// rollForward replaces each record by its ID's intent where the intent is
// newer (a change announced and then not recorded: the runtime may have
// shown its version, which therefore stays its config's), drops every
// intent, and returns the intents it adopted. The files keep the intents
// until the next compaction; a later start adopts them again only over a
// record older than they are, which is the same state.
//
// An intent that names (by ID or alias) what another recorded model names
// is not adopted: the runtime refuses a name another model holds, and that
// model's record is a commit, so the announced change cannot have
// committed (another model's PUT claimed the name between the
// announcement and the commit, then the server died before the
// cancellation). Adopting it would make the start fail on the conflict.
func (s *Store) rollForward() []Model {
	var out []Model
	for _, id := range slices.Sorted(maps.Keys(s.intents)) {
		in := s.intents[id]
		if old, ok := s.get(id); ok && old.ConfigVersion >= in.ConfigVersion {
			continue // the record already has it, or something newer
		}
		if s.namesTaken(in) {
			s.log.Warn("state dir: an announced change names what another recorded model holds, so it never committed; it is dropped",
				"model", in.ID, "config_version", in.ConfigVersion, "aliases", strings.Join(in.Aliases, ","))
			continue
		}
		s.put(in)
		out = append(out, in)
	}
	clear(s.intents)
	return out
}

// namesTaken reports whether another registered (not unregistered) model's
// record holds m's ID or one of its aliases, as its ID or an alias.
func (s *Store) namesTaken(m Model) bool {
	names := append([]string{m.ID}, m.Aliases...)
	for _, o := range s.models {
		if o.ID == m.ID || o.Unregistered {
			continue
		}
		if slices.Contains(names, o.ID) {
			return true
		}
		for _, a := range o.Aliases {
			if slices.Contains(names, a) {
				return true
			}
		}
	}
	return false
}

// openJournal replays the journal of the snapshot's generation and opens
// it for appending; a missing or stale journal is replaced by an empty one.
func (s *Store) openJournal() error {
	file := s.path(journalName)
	b, err := readFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return s.newJournal()
	}
	if err != nil {
		return fmt.Errorf("journal %s: %w", file, err)
	}
	gen, recs, good, torn, err := parseJournal(b)
	if err != nil {
		return fmt.Errorf("journal %s is corrupt (%w); it is kept as it is: repair or remove it to start", file, err)
	}
	if gen != s.gen {
		if gen > s.gen {
			return fmt.Errorf("journal %s is corrupt (generation %d, newer than its snapshot's %d); it is kept as it is: repair or remove it to start", file, gen, s.gen)
		}
		// A compaction wrote the snapshot and died before the new journal:
		// every record of this one is in the snapshot.
		s.log.Warn("state dir: replaced a journal that an unfinished compaction left; its changes are in the snapshot", "file", file, "generation", gen)
		return s.newJournal()
	}
	for _, c := range recs {
		s.adopt(c)
	}
	f, err := openRegular(file, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("journal %s: %w", file, err)
	}
	if torn {
		s.log.Warn("state dir: cut off a journal record torn by a crash; it was never acknowledged", "file", file, "offset", good, "bytes", len(b)-good)
		err := f.Truncate(int64(good))
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("journal %s: cutting off its torn record: %w", file, err)
		}
	}
	s.jf, s.jsize = f, int64(good)
	return nil
}

// put records m in memory, replacing the record of its ID or appending it.
func (s *Store) put(m Model) {
	if k, ok := s.index[m.ID]; ok {
		s.models[k] = m
		return
	}
	s.index[m.ID] = len(s.models)
	s.models = append(s.models, m)
}

func (s *Store) adopt(c change) {
	if c.ModelsRoot != nil {
		s.root = *c.ModelsRoot
	}
	for _, m := range c.Models {
		s.put(m)
	}
	for _, id := range c.Settled {
		delete(s.intents, id)
	}
	for _, m := range c.Intents {
		// An intent still pending when the next one of its ID comes was
		// neither cancelled nor recorded apart: it committed as announced
		// (Registry.settle records such a change by its intent alone).
		if in, ok := s.intents[m.ID]; ok {
			if old, known := s.get(m.ID); !known || old.ConfigVersion < in.ConfigVersion {
				s.put(in)
			}
		}
		s.intents[m.ID] = m
	}
}

// pending returns the unsettled intents in ID order. Call with mu held.
func (s *Store) pending() []Model {
	var out []Model
	for _, id := range slices.Sorted(maps.Keys(s.intents)) {
		out = append(out, s.intents[id])
	}
	return out
}

// State returns a copy of the recorded state.
func (s *Store) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return State{ModelsRoot: s.root, Journal: s.gen, Models: slices.Clone(s.models)}
}

// get returns id's record. Call with mu held.
func (s *Store) get(id string) (Model, bool) {
	if k, ok := s.index[id]; ok {
		return s.models[k], true
	}
	return Model{}, false
}

// commit makes c durable, then adopts it: one appended record, fsynced.
// On failure the recorded state stays as it was, and the journal is
// rewritten before the next append (what a failed write or fsync left in
// it is never trusted). Call with mu held.
func (s *Store) commit(c change) error {
	if err := s.checkLock(); err != nil {
		return err
	}
	rec, err := encodeRecord(c)
	if err != nil {
		return err
	}
	if s.jf == nil {
		// The last append failed: the state with c becomes a snapshot
		// and a new journal starts.
		next := &Store{index: maps.Clone(s.index), models: slices.Clone(s.models), root: s.root, intents: maps.Clone(s.intents)}
		next.adopt(c)
		if snapped, err := s.compactTo(State{ModelsRoot: next.root, Models: next.models, Intents: next.pending()}); err != nil {
			if !snapped {
				return err
			}
			// The snapshot holding c is in place, so c is durable: a start
			// restores it (and replaces the older journal). Only the new
			// journal failed; the next change writes a snapshot again.
			s.log.Warn("state dir: the change is recorded in a new snapshot, but the journal after it could not be started; the next change writes a snapshot again", "err", err)
		}
		s.adopt(c)
		return nil
	}
	err = s.write(s.jf, rec)
	if err == nil {
		err = s.jf.Sync()
	}
	if err != nil {
		// Whatever reached the file is cut off if it can be; either way
		// the next change starts a new journal.
		_ = s.jf.Truncate(s.jsize)
		_ = s.jf.Close()
		s.jf = nil
		return fmt.Errorf("state: appending to %s: %w", s.path(journalName), err)
	}
	s.jsize += int64(len(rec))
	s.adopt(c)
	if s.jsize > compactMin && s.jsize > s.snap {
		if _, err := s.compactTo(State{ModelsRoot: s.root, Models: s.models, Intents: s.pending()}); err != nil {
			// c is durable in the journal; the compaction is tried again
			// at the next change.
			s.log.Warn("state dir: compaction failed; the journal keeps growing until one succeeds", "err", err)
		}
	}
	return nil
}

// Compact writes the recorded state as a new snapshot and starts an empty
// journal (what a change does by itself once the journal outgrows the
// snapshot).
func (s *Store) Compact() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkLock(); err != nil {
		return err
	}
	_, err := s.compactTo(State{ModelsRoot: s.root, Models: s.models, Intents: s.pending()})
	return err
}

// compactTo makes st durable as the snapshot of the next generation, then
// starts that generation's empty journal. snapped reports whether the
// snapshot is in place, so st durable, even when err says the journal
// after it failed (no journal is then open: the next change writes a
// snapshot again). Call with mu held.
func (s *Store) compactTo(st State) (snapped bool, err error) {
	st.Journal = s.gen + 1
	b, err := EncodeSnapshot(st)
	if err != nil {
		return false, err
	}
	if err := s.replace(snapshotName, b); err != nil {
		return false, err
	}
	s.gen, s.snap = st.Journal, int64(len(b))
	if s.jf != nil {
		_ = s.jf.Close()
		s.jf = nil
	}
	return true, s.newJournal()
}

// newJournal replaces the journal by an empty one of generation s.gen and
// opens it for appending.
func (s *Store) newJournal() error {
	head := fmt.Appendf(nil, "%s %d gen=%d\n", journalMagic, journalFormat, s.gen)
	if err := s.replace(journalName, head); err != nil {
		return err
	}
	f, err := openRegular(s.path(journalName), os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	s.jf, s.jsize = f, int64(len(head))
	return nil
}

// replace writes b as the file name: a temporary file, fsync, rename over
// name, fsync of the folder. A crash leaves the old file or the new one.
func (s *Store) replace(name string, b []byte) error {
	file, tmp := s.path(name), s.path(name+tempSuffix)
	f, err := createTemp(tmp)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	err = s.write(f, b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("state: writing %s: %w", file, err)
	}
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

// SetWriteHook replaces the function that writes the state's bytes to a
// file (nil restores the plain write): tests fail or tear writes with it.
func (s *Store) SetWriteHook(w func(f *os.File, b []byte) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w == nil {
		w = writeAll
	}
	s.write = w
}

// Close releases the lock and the journal.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jf != nil {
		_ = s.jf.Close()
		s.jf = nil
	}
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close() // closing the descriptor releases the flock
	s.lock = nil
	return err
}

// ReadState reads the state recorded in dir without taking its lock (for
// tests and tools): the snapshot with its journal's records, and the
// intents a start would roll forward.
func ReadState(dir string) (State, error) {
	st, _, err := readSnapshot(filepath.Join(dir, snapshotName))
	if err != nil {
		return State{}, err
	}
	var recs []change
	file := filepath.Join(dir, journalName)
	b, err := readFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return State{}, fmt.Errorf("journal %s: %w", file, err)
	default:
		gen, rs, _, _, err := parseJournal(b)
		if err != nil {
			return State{}, fmt.Errorf("journal %s is corrupt (%w)", file, err)
		}
		if gen == st.Journal {
			recs = rs
		}
	}
	s := &Store{index: map[string]int{}, root: st.ModelsRoot, intents: map[string]Model{}}
	for _, m := range st.Models {
		s.put(m)
	}
	for _, m := range st.Intents {
		s.intents[m.ID] = m
	}
	for _, c := range recs {
		s.adopt(c)
	}
	s.rollForward()
	return State{ModelsRoot: s.root, Journal: st.Journal, Models: s.models}, nil
}
