package catalogue

import (
	"context"
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
// file identity (device, inode, size, modification time), matching or
// not, so repeated loads of unchanged files cost a stat each. Errors wrap
// backends.ErrInvalid.
func Load(dir string) (*Checkpoint, error) {
	return LoadContext(context.Background(), dir)
}

// LoadContext is Load that stops hashing when ctx ends (checked between
// blocks of hashBlock bytes); the error then wraps ctx.Err() and not
// backends.ErrInvalid.
func LoadContext(ctx context.Context, dir string) (*Checkpoint, error) {
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
	if err := c.VerifyContext(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Verify checks every listed file against its size and SHA-256.
func (c *Checkpoint) Verify() error {
	return c.VerifyContext(context.Background())
}

// VerifyContext is Verify that stops hashing when ctx ends.
func (c *Checkpoint) VerifyContext(ctx context.Context) error {
	for _, f := range c.Files {
		if err := verifyFile(ctx, c.Dir, f); err != nil {
			return fmt.Errorf("checkpoint %q: %w", c.Name, err)
		}
	}
	return nil
}

// fileID is what makes a cached hash valid for a path: the file it named
// when it was hashed.
type fileID struct {
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

type cachedSum struct {
	id  fileID
	sum string
}

// hashCache maps a resolved path to the SHA-256 of the file it last named,
// whether or not that matched a manifest: a second scan of a corrupt file
// costs a stat, like one of a good file. One entry per path, so replacing
// a file never grows it.
var hashCache sync.Map // string -> cachedSum

func verifyFile(ctx context.Context, dir string, f File) error {
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
	id := fileID{size: st.Size(), mtimeNanos: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(sys.Dev), sys.Ino
	}
	var sum string
	if v, ok := hashCache.Load(p); ok && v.(cachedSum).id == id {
		sum = v.(cachedSum).sum
	} else {
		if sum, err = HashFileContext(ctx, p); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("file %q: %w", f.Path, err)
			}
			return backends.Invalidf("file %q: %v", f.Path, err)
		}
		hashCache.Store(p, cachedSum{id: id, sum: sum})
	}
	if sum != f.SHA256 {
		return backends.Invalidf("file %q: SHA-256 %s does not match the manifest's %s (corrupt or replaced)", f.Path, sum, f.SHA256)
	}
	return nil
}

// hashBlock is how much HashFileContext reads between two looks at its
// context: cancelling a hash wastes at most one block.
const hashBlock = 1 << 20

// hashRead, when set (tests), is called after every block a hash reads,
// with the file and the block's size.
var hashRead func(path string, n int)

// HashFile returns the lowercase hex SHA-256 of the file at p.
func HashFile(p string) (string, error) {
	return HashFileContext(context.Background(), p)
}

// HashFileContext is HashFile that stops when ctx ends, checking it before
// each block of hashBlock bytes; the error then wraps ctx.Err().
func HashFileContext(ctx context.Context, p string) (string, error) {
	fh, err := os.Open(p)
	if err != nil {
		return "", unwrapPathErr(err)
	}
	defer fh.Close()
	h := sha256.New()
	buf := make([]byte, hashBlock)
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("hashing stopped: %w", err)
		}
		n, err := io.ReadFull(fh, buf)
		if n > 0 {
			h.Write(buf[:n])
			if hashRead != nil {
				hashRead(p, n)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
