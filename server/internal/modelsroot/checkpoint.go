package modelsroot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Resolve keeps a model spec's checkpoint inside the models root
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
func Resolve(root, checkpoint string) (string, error) {
	if checkpoint == "" { // (1)
		return "", nil
	}
	if err := catalogue.CheckRelPath(checkpoint); err != nil { // (2)
		return "", httpapi.InvalidParam("checkpoint", "checkpoint must be a relative path inside --models-root: %v", err)
	}
	if root == "" {
		root = "."
	}
	_, err := os.Lstat(filepath.Join(root, filepath.FromSlash(checkpoint)))
	switch {
	case err == nil: // (3)
		p, err := catalogue.Within(root, checkpoint)
		if err != nil { // its text names the resolved root: not for clients (err.models-root-leak)
			return "", httpapi.InvalidParam("checkpoint", "checkpoint %q resolves outside the models root or cannot be read", checkpoint)
		}
		return p, nil
	case errors.Is(err, fs.ErrNotExist) && !strings.Contains(checkpoint, "/"): // (4)
		return checkpoint, nil
	case errors.Is(err, fs.ErrNotExist): // (5)
		return "", httpapi.InvalidParam("checkpoint", "checkpoint %q not found under the models root", checkpoint)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) { // the path error's path is root-joined: keep only the reason
		err = pe.Err
	}
	return "", httpapi.InvalidParam("checkpoint", "checkpoint %q: %v", checkpoint, err)
}

// Rel undoes Resolve where it can: an absolute path inside root becomes
// relative to it; anything else is returned unchanged (an engine-specific
// name, or a path under a models root that was since replaced, which a
// PUT then refuses).
func Rel(root, cp string) string {
	if !filepath.IsAbs(cp) {
		return cp
	}
	if root == "" {
		root = "."
	}
	base, err := filepath.Abs(root)
	if err != nil {
		return cp
	}
	if real, err := filepath.EvalSymlinks(base); err == nil {
		base = real
	}
	rel, err := filepath.Rel(base, cp)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return cp
	}
	return filepath.ToSlash(rel)
}
