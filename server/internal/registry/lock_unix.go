//go:build unix

package registry

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir opens path and takes an exclusive, non-blocking flock on it for
// the server's lifetime (CONTRACT.md persist.lock). The kernel drops it when
// the process dies, kill -9 included, so a crash never leaves a stale lock.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|oNoFollow|oNonBlock, 0o600)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("state dir lock %s is %s, not a regular file: remove it to start", path, kind(fi.Mode()))
		}
		return nil, fmt.Errorf("state dir lock %s: %w", path, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("state dir lock %s: %w", path, err)
		}
		return nil, fmt.Errorf("state dir lock %s is %s, not a regular file: remove it to start", path, kind(fi.Mode()))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state dir lock %s: another sluice server is using this state dir: %w", path, err)
		}
		return nil, fmt.Errorf("state dir lock %s: %w", path, err)
	}
	return f, nil
}

// The open flags of the state files (files.go): never follow a symlink,
// never block on a named pipe.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)
