package catalogue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Recipe is one checkpoint to build: its manifest (Build fills Files) and
// where each file comes from.
type Recipe struct {
	Manifest Manifest
	Files    []Source
}

// Source copies the file Src (absolute) to Dest (relative to the
// checkpoint folder), or writes Content there when Src is empty (a small
// file the recipe generates, such as a voice variant).
type Source struct {
	Dest    string
	Src     string
	Content []byte
}

// BuildReport counts what Build did, so a second run can show it did
// nothing.
type BuildReport struct {
	Copied, Kept     int // files
	Written, Current int // manifests
}

// Build writes every recipe to root/<name>, creating root if needed.
// It is idempotent: a file already present with the source's size and
// hash is kept, a manifest with the same bytes is not rewritten, and
// every write goes through a temporary file and a rename, so an
// interrupted build never leaves a half-written file under its final name.
func Build(root string, recipes []Recipe) (BuildReport, error) {
	var rep BuildReport
	if err := os.MkdirAll(root, 0o755); err != nil {
		return rep, err
	}
	for _, r := range recipes {
		if err := buildOne(root, r, &rep); err != nil {
			return rep, fmt.Errorf("checkpoint %q: %w", r.Manifest.Name, err)
		}
	}
	return rep, nil
}

func buildOne(root string, r Recipe, rep *BuildReport) error {
	m := r.Manifest
	if !ValidName(m.Name) {
		return fmt.Errorf("invalid checkpoint name %q", m.Name)
	}
	dir := filepath.Join(root, m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	m.Files = nil
	for _, s := range r.Files {
		if err := CheckRelPath(s.Dest); err != nil {
			return err
		}
		var sum string
		var size int64
		var err error
		if s.Src == "" {
			h := sha256.Sum256(s.Content)
			sum, size = hex.EncodeToString(h[:]), int64(len(s.Content))
		} else if sum, size, err = hashSize(s.Src); err != nil {
			return fmt.Errorf("source %s: %w", s.Src, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(s.Dest))
		if dsum, dsize, err := hashSize(dst); err == nil && dsum == sum && dsize == size {
			rep.Kept++
		} else {
			if s.Src == "" {
				err = writeAtomicDir(dst, bytes.NewReader(s.Content))
			} else {
				err = copyFile(s.Src, dst)
			}
			if err != nil {
				return err
			}
			rep.Copied++
		}
		m.Files = append(m.Files, File{Path: s.Dest, Size: size, SHA256: sum})
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	if err := m.Check(); err != nil {
		return err
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	mp := filepath.Join(dir, ManifestName)
	if old, err := os.ReadFile(mp); err == nil && bytes.Equal(old, b) {
		rep.Current++
		return nil
	}
	if err := writeAtomic(mp, bytes.NewReader(b)); err != nil {
		return err
	}
	rep.Written++
	return nil
}

func hashSize(p string) (string, int64, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is not a regular file", p)
	}
	sum, err := HashFile(p)
	return sum, st.Size(), err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomicDir(dst, in)
}

// writeAtomicDir is writeAtomic after creating dst's folder.
func writeAtomicDir(dst string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return writeAtomic(dst, r)
}

func writeAtomic(dst string, r io.Reader) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
