package server

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/backends/catalogue"
)

// resolveCheckpoint keeps a model spec's checkpoint inside the models root
// (security: no "..", no symlink escape):
//
//	(1) an empty checkpoint stays empty (the engine's default);
//	(2) anything but a clean relative path (absolute, "." or ".." elements,
//	    backslashes, NUL) is refused;
//	(3) a path that exists under root is resolved with symlinks followed
//	    (catalogue.Within) and must stay inside the resolved root; the
//	    engine receives the absolute resolved path;
//	(4) a single name that does not exist under root is passed on unchanged
//	    as an engine-specific name (a built-in voice, a fixture label);
//	(5) a longer path that does not exist is refused.
func resolveCheckpoint(root, checkpoint string) (string, error) {
	if checkpoint == "" { // (1)
		return "", nil
	}
	if err := catalogue.CheckRelPath(checkpoint); err != nil { // (2)
		return "", InvalidParam("checkpoint", "checkpoint must be a relative path inside --models-root: %v", err)
	}
	if root == "" {
		root = "."
	}
	_, err := os.Lstat(filepath.Join(root, filepath.FromSlash(checkpoint)))
	switch {
	case err == nil: // (3)
		p, err := catalogue.Within(root, checkpoint)
		if err != nil { // its text names the resolved root: not for clients (err.models-root-leak)
			return "", InvalidParam("checkpoint", "checkpoint %q resolves outside the models root or cannot be read", checkpoint)
		}
		return p, nil
	case errors.Is(err, fs.ErrNotExist) && !strings.Contains(checkpoint, "/"): // (4)
		return checkpoint, nil
	case errors.Is(err, fs.ErrNotExist): // (5)
		return "", InvalidParam("checkpoint", "checkpoint %q not found under the models root", checkpoint)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) { // the path error's path is root-joined: keep only the reason
		err = pe.Err
	}
	return "", InvalidParam("checkpoint", "checkpoint %q: %v", checkpoint, err)
}
