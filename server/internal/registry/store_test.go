package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type logBuf struct{ bytes.Buffer }

func openT(t *testing.T, dir string) (*Store, *logBuf) {
	t.Helper()
	var lb logBuf
	s, err := Open(dir, slog.New(slog.NewTextHandler(&lb, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, &lb
}

func model(id string, v uint64) Model {
	return Model{ID: id, ConfigVersion: v, Loaded: true, Task: "tts", Engine: "fixture", Options: json.RawMessage(`{}`), Slots: 1,
		AdmissionTimeoutNS: -1}
}

func commitT(t *testing.T, s *Store, ms ...Model) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.commit(change{Models: ms}); err != nil {
		t.Fatal(err)
	}
}

func versions(st State) string {
	var b strings.Builder
	for _, m := range st.Models {
		fmt.Fprintf(&b, "%s@%d ", m.ID, m.ConfigVersion)
	}
	return strings.TrimSpace(b.String())
}

// Changes are appended to the journal and replayed at the next open in
// order, a later record of an ID replacing the earlier one in its place.
func TestJournalReplays(t *testing.T) {
	dir := t.TempDir()
	s, _ := openT(t, dir)
	commitT(t, s, model("a", 1))
	commitT(t, s, model("b", 1), model("c", 1))
	commitT(t, s, model("a", 2))
	root := "/srv/models"
	s.mu.Lock()
	if err := s.commit(change{ModelsRoot: &root}); err != nil {
		t.Fatal(err)
	}
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a change wrote a snapshot: %v", err)
	}
	s, _ = openT(t, dir)
	defer s.Close()
	st := s.State()
	if got := versions(st); got != "a@2 b@1 c@1" || st.ModelsRoot != root {
		t.Fatalf("replayed %q root %q", got, st.ModelsRoot)
	}
	if rs, err := ReadState(dir); err != nil || versions(rs) != "a@2 b@1 c@1" {
		t.Fatalf("ReadState: %q %v", versions(rs), err)
	}
}

// Past its bound the journal is compacted into a snapshot of the next
// generation and starts empty; the state is the same after a reopen.
func TestJournalCompacts(t *testing.T) {
	dir := t.TempDir()
	s, _ := openT(t, dir)
	for k := range 400 {
		commitT(t, s, model(fmt.Sprintf("m%d", k%7), uint64(k+1)))
	}
	if s.gen == 0 {
		t.Fatal("400 records of ~250 bytes never compacted")
	}
	if s.jsize > compactMin+1024 {
		t.Fatalf("journal %d bytes after compaction", s.jsize)
	}
	want := versions(s.State())
	_ = s.Close()
	s, _ = openT(t, dir)
	defer s.Close()
	if got := versions(s.State()); got != want {
		t.Fatalf("after compaction and reopen: %q, want %q", got, want)
	}
}

// A journal of an older generation than the snapshot is what a crash
// between the compaction's two renames leaves: its records are in the
// snapshot, and it is replaced with a WARN, never replayed over it.
func TestStaleJournalReplaced(t *testing.T) {
	dir := t.TempDir()
	s, _ := openT(t, dir)
	commitT(t, s, model("a", 1))
	commitT(t, s, model("a", 2))
	old, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	commitT(t, s, model("a", 3))
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := os.WriteFile(filepath.Join(dir, journalName), old, 0o600); err != nil { // the compaction died before its journal
		t.Fatal(err)
	}
	s, lb := openT(t, dir)
	defer s.Close()
	if got := versions(s.State()); got != "a@3" {
		t.Fatalf("state %q, want a@3: the stale journal was replayed", got)
	}
	if !strings.Contains(lb.String(), "unfinished compaction") {
		t.Fatalf("no WARN:\n%s", lb)
	}
}

// A torn last record (cut anywhere, header included) is cut off with a
// WARN; a complete record with a bad checksum, a record in the middle
// that is damaged, or a bad header is a startup error naming the file, and
// the journal is left as it is (CONTRACT.md persist.atomic, persist.corrupt).
func TestJournalTornAndCorrupt(t *testing.T) {
	build := func(t *testing.T) (string, []byte, []byte) {
		dir := t.TempDir()
		s, _ := openT(t, dir)
		commitT(t, s, model("a", 1))
		good, _ := os.ReadFile(filepath.Join(dir, journalName))
		commitT(t, s, model("a", 2))
		_ = s.Close()
		all, _ := os.ReadFile(filepath.Join(dir, journalName))
		return dir, good, all
	}
	_, good, all := build(t)
	last := all[len(good):]
	for cut := 1; cut < len(last); cut++ {
		dir, _, _ := build(t)
		file := filepath.Join(dir, journalName)
		if err := os.WriteFile(file, all[:len(good)+cut], 0o600); err != nil {
			t.Fatal(err)
		}
		s, lb := openT(t, dir)
		if got := versions(s.State()); got != "a@1" {
			t.Fatalf("cut at %d: %q, want a@1", cut, got)
		}
		_ = s.Close()
		if !strings.Contains(lb.String(), "torn by a crash") {
			t.Fatalf("cut at %d: no WARN", cut)
		}
		if b, _ := os.ReadFile(file); !bytes.Equal(b, good) {
			t.Fatalf("cut at %d: the torn record was not cut off", cut)
		}
	}
	flip := func(b []byte, at int) []byte { c := bytes.Clone(b); c[at] ^= 0x01; return c }
	bodyAt := len(good) + bytes.IndexByte(last, '\n') + 5
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"last record's checksum":  {flip(all, bodyAt), "checksum mismatch"},
		"first record's checksum": {flip(all, bytes.IndexByte(good[bytes.IndexByte(good, '\n')+1:], '\n')+bytes.IndexByte(good, '\n')+6), "checksum mismatch"},
		"bad header":              {append([]byte("other 1 gen=0\n"), all[bytes.IndexByte(all, '\n')+1:]...), "bad header"},
		"no header":               {[]byte("sluice-jour"), "no header line"},
		"garbage record":          {append(bytes.Clone(all), "hello\n"...), "bad header"},
		"future generation":       {bytes.Replace(all, []byte("gen=0"), []byte("gen=5"), 1), "newer than its snapshot"},
	} {
		dir, _, _ := build(t)
		file := filepath.Join(dir, journalName)
		if err := os.WriteFile(file, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s and %q", name, err, file, tc.want)
		}
		if b, _ := os.ReadFile(file); !bytes.Equal(b, tc.data) {
			t.Errorf("%s: the corrupt journal was changed", name)
		}
	}
}

// A failed append changes nothing recorded, and the next change rewrites
// the state (snapshot and new journal) instead of appending after what the
// failed write may have left.
func TestFailedAppendRewrites(t *testing.T) {
	dir := t.TempDir()
	s, _ := openT(t, dir)
	commitT(t, s, model("a", 1))
	s.SetWriteHook(func(f *os.File, b []byte) error {
		_, _ = f.Write(b[:len(b)-3]) // a record cut short, and an error
		return errors.New("disk full")
	})
	s.mu.Lock()
	err := s.commit(change{Models: []Model{model("a", 2)}})
	s.mu.Unlock()
	if err == nil {
		t.Fatal("the failed append reported success")
	}
	if got := versions(s.State()); got != "a@1" {
		t.Fatalf("after a failed append: %q", got)
	}
	s.SetWriteHook(nil)
	commitT(t, s, model("b", 1))
	_ = s.Close()
	s, lb := openT(t, dir)
	defer s.Close()
	if got := versions(s.State()); got != "a@1 b@1" {
		t.Fatalf("after reopen: %q", got)
	}
	if strings.Contains(lb.String(), "level=WARN") {
		t.Fatalf("a clean state warned:\n%s", lb)
	}
}

// A format 1 snapshot (before the journal) is read as generation 0.
func TestFormat1Snapshot(t *testing.T) {
	dir := t.TempDir()
	b, err := EncodeSnapshot(State{Models: []Model{model("a", 4)}})
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("registry 2 "), []byte("registry 1 "), 1)
	if err := os.WriteFile(filepath.Join(dir, snapshotName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := openT(t, dir)
	commitT(t, s, model("a", 5))
	_ = s.Close()
	s, _ = openT(t, dir)
	defer s.Close()
	if got := versions(s.State()); got != "a@5" {
		t.Fatalf("%q", got)
	}
}

// BenchmarkCommit is one durable change (an appended, fsynced record) with
// 50 and 4,000 recorded models: the same cost for both.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{50, 4000} {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) {
			s, err := Open(b.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var all []Model
			for k := range n {
				all = append(all, model(fmt.Sprintf("model-%d", k), 1))
			}
			if _, err := s.compactTo(State{Models: all}); err != nil {
				b.Fatal(err)
			}
			for _, m := range all {
				s.put(m)
			}
			v := uint64(1)
			for b.Loop() {
				v++
				s.mu.Lock()
				err := s.commit(change{Models: []Model{model("model-0", v)}})
				s.mu.Unlock()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestIntentsReplay: an intent is rolled forward at start over an older
// record of its ID, never over a newer one; a settled (cancelled) one is
// not; one still pending when the next of its ID comes committed as
// announced, so replay rolls it forward first (CONTRACT.md
// persist.version-continues).
func TestIntentsReplay(t *testing.T) {
	dir := t.TempDir()
	s, _ := openT(t, dir)
	commitT(t, s, model("a", 1), model("b", 1))
	s.mu.Lock()
	for _, c := range []change{
		{Intents: []Model{model("a", 2)}},                        // committed as announced: no record follows
		{Intents: []Model{model("a", 3)}},                        // refused: cancelled below
		{Settled: []string{"a"}},                                 //
		{Intents: []Model{model("b", 2)}},                        // recorded otherwise below
		{Models: []Model{model("b", 2)}, Settled: []string{"b"}}, //
		{Intents: []Model{model("c", 1)}},                        // a crash before its record
	} {
		if err := s.commit(c); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Unlock()
	_ = s.Close()
	want := "a@2 b@2 c@1"
	if st, err := ReadState(dir); err != nil || versions(st) != want {
		t.Fatalf("ReadState: %q %v, want %q", versions(st), err, want)
	}
	s, lb := openT(t, dir)
	if got := versions(s.State()); got != want {
		t.Fatalf("after reopen: %q, want %q", got, want)
	}
	if !strings.Contains(lb.String(), "announced") {
		t.Fatalf("no WARN for the rolled-forward intent:\n%s", lb)
	}
	if err := s.Compact(); err != nil { // the snapshot keeps no intent
		t.Fatal(err)
	}
	_ = s.Close()
	s, _ = openT(t, dir)
	defer s.Close()
	if got := versions(s.State()); got != want || len(s.intents) != 0 {
		t.Fatalf("after compaction: %q, %d intents", got, len(s.intents))
	}
}

// TestIntentNamingATakenNameDropped: an intent that names what another
// recorded model holds (its ID or an alias) never committed, so a start
// drops it instead of adopting it and failing on the conflict; an intent
// whose names are free is adopted as before (CONTRACT.md
// persist.version-continues).
func TestIntentNamingATakenNameDropped(t *testing.T) {
	dir := t.TempDir()
	s, _ := openT(t, dir)
	held := model("a", 1)
	held.Aliases = []string{"voice"}
	commitT(t, s, held, model("b", 1))
	clash := model("c", 1)
	clash.Aliases = []string{"voice"} // the alias model a holds
	byID := model("b", 2)
	byID.Aliases = []string{"a"} // another model's ID
	free := model("d", 1)
	free.Aliases = []string{"other"}
	s.mu.Lock()
	for _, c := range []change{{Intents: []Model{clash}}, {Intents: []Model{byID}}, {Intents: []Model{free}}} {
		if err := s.commit(c); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Unlock()
	_ = s.Close()
	s, lb := openT(t, dir)
	defer s.Close()
	if got, want := versions(s.State()), "a@1 b@1 d@1"; got != want {
		t.Fatalf("after reopen: %q, want %q", got, want)
	}
	if n := strings.Count(lb.String(), "never committed"); n != 2 {
		t.Fatalf("%d WARNs for the dropped intents, want 2:\n%s", n, lb)
	}
}
