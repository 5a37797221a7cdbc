package catalogue

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// CheckRelPath validates a path meant to stay inside a folder: relative,
// slash-separated, already clean, no "." or ".." element, no backslash or
// NUL. Errors wrap backends.ErrInvalid.
func CheckRelPath(p string) error {
	switch {
	case p == "":
		return backends.Invalidf("empty path")
	case strings.ContainsAny(p, "\\\x00"):
		return backends.Invalidf("path %q contains a backslash or NUL", p)
	case strings.HasPrefix(p, "/"):
		return backends.Invalidf("path %q is absolute", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return backends.Invalidf("path %q has an empty, . or .. element", p)
		}
	}
	return nil
}

// Within joins rel onto dir and returns the absolute, symlink-resolved
// path, refusing a rel that is not a clean relative path and any result
// (after following symlinks) outside dir. The target must exist. Errors
// wrap backends.ErrInvalid.
func Within(dir, rel string) (string, error) {
	if err := CheckRelPath(rel); err != nil {
		return "", err
	}
	base, err := realDir(dir)
	if err != nil {
		return "", err
	}
	p, err := filepath.EvalSymlinks(filepath.Join(base, filepath.FromSlash(rel)))
	if err != nil {
		return "", backends.Invalidf("%s: %v", rel, unwrapPathErr(err))
	}
	if !inside(base, p) {
		return "", backends.Invalidf("%s resolves outside %s (symlink escape)", rel, base)
	}
	return p, nil
}

// realDir returns dir made absolute with symlinks resolved; it must be a
// directory.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", backends.Invalidf("%s: %v", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", backends.Invalidf("%s: %v", dir, unwrapPathErr(err))
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", backends.Invalidf("%s: %v", dir, unwrapPathErr(err))
	}
	if !st.IsDir() {
		return "", backends.Invalidf("%s is not a directory", dir)
	}
	return real, nil
}

func inside(base, p string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
