//go:build unix

package edge

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the process's soft RLIMIT_NOFILE to its hard limit
// (edge.conn-limit) and returns the soft limit in use afterwards.
func RaiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("server: getrlimit: %w", err)
	}
	if l.Cur < l.Max {
		want := l
		want.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return uint64(l.Cur), fmt.Errorf("server: setrlimit: %w", err)
		}
		l = want
	}
	return uint64(l.Cur), nil
}

// fileLimit returns the soft RLIMIT_NOFILE, or 0 when it is unknown.
func fileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return uint64(l.Cur)
}
