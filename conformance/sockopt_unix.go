//go:build unix

package conformance

import "syscall"

// setRecvBuffer sets SO_RCVBUF on a socket before it connects.
func setRecvBuffer(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}
