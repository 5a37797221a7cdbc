//go:build !unix

package registry

import (
	"errors"
	"os"
)

// lockDir: --state-dir needs flock, which this platform lacks.
func lockDir(path string) (*os.File, error) {
	return nil, errors.New("state dir lock " + path + ": --state-dir is supported on unix systems only")
}

// The open flags of the state files (files.go): --state-dir is refused
// here before any file is opened.
const (
	oNoFollow = 0
	oNonBlock = 0
)
