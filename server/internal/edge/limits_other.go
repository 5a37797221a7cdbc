//go:build !unix

package edge

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE.
func RaiseFileLimit() (uint64, error) { return 0, nil }

// fileLimit returns 0: unknown.
func fileLimit() uint64 { return 0 }
