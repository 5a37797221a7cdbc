package registry

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The state dir's files are opened so that nothing planted in the dir can
// redirect or stall a write or a start (CONTRACT.md persist.files): a
// temporary file is created with O_EXCL|O_NOFOLLOW (a symlink or anything
// else at its path is refused, never written through), a state file that
// is not a regular file (a symlink, a named pipe, a directory, a device)
// is refused at start instead of followed or blocked on, and the lock is
// checked before every durable write, so a server whose lock file was
// removed or replaced stops writing instead of sharing the dir with a
// second server (persist.lock).

// kind names a file mode's type for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// notRegular is the error of a state file that is not a regular file.
func notRegular(path string, m fs.FileMode) error {
	return fmt.Errorf("state file %s is %s, not a regular file: remove it (or use another --state-dir) to start", path, kind(m))
}

// clearTemp removes a temporary file a crash left at path: a regular file
// is removed (removed true); nothing there is fine; anything else (a
// symlink, a directory, a named pipe) is not ours and is refused.
func clearTemp(path string) (removed bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("state file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return false, notRegular(path, fi.Mode())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("state file %s: %w", path, err)
	}
	return true, nil
}

// createTemp creates the temporary file path anew: a stale regular file is
// removed first; then O_CREATE|O_EXCL|O_NOFOLLOW, so that whatever appears
// at path in between (a symlink to a file elsewhere) makes the open fail
// instead of being written through.
func createTemp(path string) (*os.File, error) {
	if _, err := clearTemp(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return f, nil
}

// openRegular opens a state file for flag without following a symlink and
// without blocking on a named pipe, and refuses anything but a regular
// file.
func openRegular(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNoFollow|oNonBlock, 0)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return nil, notRegular(path, fi.Mode())
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, notRegular(path, fi.Mode())
	}
	return f, nil
}

// readFile reads a state file whole, bounded by maxStateBytes.
func readFile(path string) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxStateBytes)
	}
	return b, nil
}

// checkLock reports an error unless the lock file this store holds is
// still the one at <dir>/lock: removed (rm DIR/lock) or replaced, another
// server can take a lock on the new file and write the same dir, so no
// write is made past it. Call with mu held.
func (s *Store) checkLock() error {
	if s.lock == nil {
		return errors.New("state: the store is closed")
	}
	path := filepath.Join(s.dir, lockName)
	held, err := s.lock.Stat()
	if err != nil {
		return fmt.Errorf("state dir lock %s: %w", path, err)
	}
	now, err := os.Lstat(path)
	if err != nil || !os.SameFile(held, now) {
		why := "replaced by another file"
		if err != nil {
			why = "removed"
		}
		return fmt.Errorf("state dir lock %s was %s while this server held it: another server may be using this state dir, so nothing more is written to it; restart this server alone on it", path, why)
	}
	return nil
}
