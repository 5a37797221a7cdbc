package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// notDurable is the answer to a change that is live but could not be
// written: 500, never a silent success.
func notDurable(err error) error {
	return &httpapi.Error{Status: 500, Type: "internal_error",
		Message: "the change was applied but could not be made durable in --state-dir; it will not survive a restart", Err: err}
}

// rotateTrace moves a non-empty trace of an earlier run aside to the first
// free path.N (N from 1), so the new run's trace starts from an empty
// machine as spec/cmd/tracecheck requires: concatenated runs re-register
// models and reuse tickets, which no single spec behaviour explains
// (CONTRACT.md persist.trace-kept).
func rotateTrace(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Size() == 0 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for n := 1; n <= maxRotatedTraces; n++ {
		to := fmt.Sprintf("%s.%d", path, n)
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(path, to); err != nil {
				return "", err
			}
			return to, nil
		}
	}
	return "", fmt.Errorf("%s.1 to %s.%d all exist; remove old traces", path, path, maxRotatedTraces)
}

const maxRotatedTraces = 1000
