//go:build !unix

package conformance

// setRecvBuffer does nothing where sockets have no SO_RCVBUF option here.
func setRecvBuffer(uintptr, int) error { return nil }
