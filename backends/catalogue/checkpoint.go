package catalogue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/sluice-dev/sluice/backends"
)

// maxManifestBytes bounds a manifest read.
const maxManifestBytes = 1 << 20

// Checkpoint is a loaded, verified checkpoint folder.
type Checkpoint struct {
	Dir string // absolute, symlink-resolved folder
	Manifest
}

// File returns the absolute path of rel inside the checkpoint, refusing
// paths that leave it (see Within). Errors wrap backends.ErrInvalid.
func (c *Checkpoint) File(rel string) (string, error) {
	return Within(c.Dir, rel)
}

// Load reads dir/manifest.json, validates it and verifies every listed file
// (regular file inside dir, size and SHA-256 as listed). Engines call it in
// Validate, before their native library sees a byte. Hashes are cached by
// file identity (device, inode, size, modification time), so repeated
// loads of unchanged files cost a stat each. Errors wrap
// backends.ErrInvalid.
func Load(dir string) (*Checkpoint, error) {
	real, err := realDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	mp := filepath.Join(real, ManifestName)
	st, err := os.Lstat(mp)
	switch {
	case err != nil:
		return nil, backends.Invalidf("checkpoint %s: no %s: %v", real, ManifestName, unwrapPathErr(err))
	case !st.Mode().IsRegular():
		return nil, backends.Invalidf("checkpoint %s: %s is not a regular file", real, ManifestName)
	case st.Size() > maxManifestBytes:
		return nil, backends.Invalidf("checkpoint %s: %s larger than %d bytes", real, ManifestName, maxManifestBytes)
	}
	b, err := os.ReadFile(mp)
	if err != nil {
		return nil, backends.Invalidf("checkpoint %s: %v", real, unwrapPathErr(err))
	}
	m, err := ParseManifest(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", real, err)
	}
	c := &Checkpoint{Dir: real, Manifest: m}
	if err := c.Verify(); err != nil {
		return nil, err
	}
	return c, nil
}

// Verify checks every listed file against its size and SHA-256.
func (c *Checkpoint) Verify() error {
	for _, f := range c.Files {
		if err := verifyFile(c.Dir, f); err != nil {
			return fmt.Errorf("checkpoint %q: %w", c.Name, err)
		}
	}
	return nil
}

type fileKey struct {
	path       string
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

// hashCache maps a file identity to its verified SHA-256.
var hashCache sync.Map // fileKey -> string

func verifyFile(dir string, f File) error {
	p, err := Within(dir, f.Path)
	if err != nil {
		return fmt.Errorf("file %q: %w", f.Path, err)
	}
	st, err := os.Stat(p)
	if err != nil {
		return backends.Invalidf("file %q: %v", f.Path, unwrapPathErr(err))
	}
	if !st.Mode().IsRegular() {
		return backends.Invalidf("file %q is not a regular file", f.Path)
	}
	if st.Size() != f.Size {
		return backends.Invalidf("file %q is %d bytes, manifest says %d (truncated or replaced)", f.Path, st.Size(), f.Size)
	}
	key := fileKey{path: p, size: st.Size(), mtimeNanos: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		key.dev, key.ino = uint64(sys.Dev), sys.Ino
	}
	sum, ok := hashCache.Load(key)
	if !ok {
		s, err := HashFile(p)
		if err != nil {
			return backends.Invalidf("file %q: %v", f.Path, err)
		}
		sum = s
	}
	if sum.(string) != f.SHA256 {
		return backends.Invalidf("file %q: SHA-256 %s does not match the manifest's %s (corrupt or replaced)", f.Path, sum, f.SHA256)
	}
	hashCache.Store(key, sum)
	return nil
}

// HashFile returns the lowercase hex SHA-256 of the file at p.
func HashFile(p string) (string, error) {
	fh, err := os.Open(p)
	if err != nil {
		return "", unwrapPathErr(err)
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
