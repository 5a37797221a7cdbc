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
