//go:build unix

package registry

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTempSymlinkRefused: a symlink planted at the temporary file's path
// is never written through (CONTRACT.md persist.files): a compaction
// fails with an error naming it and the link's target is untouched; at
// start the link is refused, not removed. A stale regular temporary file
// is removed and written anew. On the old code (O_CREATE|O_TRUNC) the
// snapshot was written through the link into the target.
func TestTempSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := openT(t, dir)
	commitT(t, s, model("a", 1))
	tmp := filepath.Join(dir, snapshotName+tempSuffix)
	if err := os.Symlink(victim, tmp); err != nil {
		t.Fatal(err)
	}
	err := s.Compact()
	if err == nil || !strings.Contains(err.Error(), tmp) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("compaction over a planted symlink: %v, want an error naming %s as a symbolic link", err, tmp)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("the snapshot was written through the symlink: the target holds %q", b)
	}
	_ = s.Close()
	if _, err := Open(dir, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("start with a symlink at %s: %v, want a refusal", tmp, err)
	}
	if fi, err := os.Lstat(tmp); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was changed at start: %v", err)
	}
	// A stale regular file is ours: removed, and the write goes on.
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	s, _ = openT(t, dir)
	defer s.Close()
	if err := os.WriteFile(tmp, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(); err != nil {
		t.Fatalf("compaction over a stale regular temporary file: %v", err)
	}
	if got := versions(s.State()); got != "a@1" {
		t.Fatalf("state %q", got)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// TestStateFileNotRegular: a state file that is not a regular file (a
// named pipe, a directory, a symlink, also to a valid snapshot) stops the
// start with an error naming the file and what it is, without blocking on
// a pipe. On the old code a named pipe blocked the start until a writer
// came (here the test's writer, whose bytes then failed to parse), and a
// symlink was followed.
func TestStateFileNotRegular(t *testing.T) {
	good := filepath.Join(t.TempDir(), "elsewhere.json")
	b, err := EncodeSnapshot(State{Models: []Model{model("a", 3)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, want string
		plant      func(path string) error
	}{
		{snapshotName, "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{journalName, "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{snapshotName, "directory", func(p string) error { return os.Mkdir(p, 0o700) }},
		{snapshotName, "symbolic link", func(p string) error { return os.Symlink(good, p) }},
		{journalName, "symbolic link", func(p string) error { return os.Symlink(good, p) }},
		{lockName, "named pipe", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, c.file)
		if err := c.plant(path); err != nil {
			t.Fatal(err)
		}
		if c.want == "named pipe" {
			feedPipe(t, path)
		}
		s, err := Open(dir, slog.New(slog.DiscardHandler))
		if err == nil {
			_ = s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s as %s: %v, want an error naming it as %s", c.file, c.want, err, c.want)
		}
	}
}

// feedPipe writes a few bytes into the named pipe at path once a reader
// opens it (the old code's blocking open), and unblocks its own open at
// the end of the test if no reader ever came.
func feedPipe(t *testing.T, path string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		_, _ = f.Write(bytes.Repeat([]byte("x"), 64))
		_ = f.Close()
	}()
	t.Cleanup(func() {
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-done // a reader's open wakes the writer's; it writes into the pipe and closes
			_ = r.Close()
		}
		<-done
	})
}

// TestLockLost: a lock file removed or replaced while the server holds it
// stops every durable write with an error that says so (CONTRACT.md
// persist.lock), so a second server that took the new lock never shares
// the dir silently. On the old code both servers went on writing.
func TestLockLost(t *testing.T) {
	for _, how := range []string{"removed", "replaced"} {
		dir := t.TempDir()
		s, _ := openT(t, dir)
		commitT(t, s, model("a", 1))
		lock := filepath.Join(dir, lockName)
		switch how {
		case "removed":
			if err := os.Remove(lock); err != nil {
				t.Fatal(err)
			}
		case "replaced":
			other := filepath.Join(dir, "other")
			if err := os.WriteFile(other, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, lock); err != nil {
				t.Fatal(err)
			}
		}
		commit := func() error {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.commit(change{Models: []Model{model("a", 2)}})
		}
		if err := commit(); err == nil || !strings.Contains(err.Error(), "lock") || !strings.Contains(err.Error(), how) {
			t.Errorf("%s lock: commit %v, want a refusal saying the lock was %s", how, err, how)
		}
		second, _ := openT(t, dir) // takes a lock on a new file
		if err := commit(); err == nil || !strings.Contains(err.Error(), "another server") {
			t.Errorf("%s lock, a second server started: commit %v, want a refusal", how, err)
		}
		if err := s.Compact(); err == nil {
			t.Errorf("%s lock: compaction went on", how)
		}
		commitT(t, second, model("b", 1))
		_ = s.Close()
		_ = second.Close()
		if st, err := ReadState(dir); err != nil || versions(st) != "a@1 b@1" {
			t.Errorf("%s lock: state %q %v, want the second server's alone", how, versions(st), err)
		}
	}
}

// TestSnapshotWithoutJournalIsDurable: a change whose record is a new
// snapshot (the journal could not be appended to) is durable once that
// snapshot is renamed into place, even when the empty journal after it
// cannot be started (a link planted at its temporary file): the change
// must then succeed, since a start restores it, and the next change
// writes a snapshot again. On the old code the change failed (answered 500,
// "will not survive a restart") and yet a start restored it (CONTRACT.md
// persist.durable-before-200, persist.files).
func TestSnapshotWithoutJournalIsDurable(t *testing.T) {
	dir := t.TempDir()
	s, lb := openT(t, dir)
	commitT(t, s, model("a", 1))
	tmp := filepath.Join(dir, journalName+tempSuffix)
	if err := os.Symlink(filepath.Join(t.TempDir(), "victim"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(); err == nil || !strings.Contains(err.Error(), tmp) {
		t.Fatalf("compaction with a link at %s: %v, want an error naming it", tmp, err)
	}
	commitT(t, s, model("b", 1)) // a snapshot as its record; the journal fails again
	commitT(t, s, model("c", 1))
	if !strings.Contains(lb.String(), "symbolic link") {
		t.Errorf("the planted link was not named in a WARN:\n%s", lb)
	}
	if fi, err := os.Lstat(tmp); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the planted link was changed: %v", err)
	}
	_ = s.Close()
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(dir)
	if err != nil || versions(st) != "a@1 b@1 c@1" {
		t.Fatalf("state %q %v, want every acknowledged change", versions(st), err)
	}
	s, _ = openT(t, dir)
	defer s.Close()
	if got := versions(s.State()); got != "a@1 b@1 c@1" {
		t.Fatalf("after reopen: %q", got)
	}
}
