package engines

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/backends/catalogue"
)

// Malformation is one way of damaging a checkpoint's file (contract
// engine.load-safety): f returns the damaged bytes of b, drawing from rng.
type Malformation struct {
	Name string
	F    func(b []byte, rng *rand.Rand) []byte
}

// Malformations are the damages the load-safety check applies to every
// file of a checkpoint: cut in half, emptied, its first 8 bytes inverted
// (a wrong magic), every 32-bit word of its first 256 bytes after the
// first 4 set to 0x7fffffff (huge counts and lengths in a header), and
// random bytes of the same length.
var Malformations = []Malformation{
	{"truncated", func(b []byte, _ *rand.Rand) []byte { return b[:len(b)/2] }},
	{"zero-length", func([]byte, *rand.Rand) []byte { return nil }},
	{"wrong-magic", func(b []byte, _ *rand.Rand) []byte {
		out := append([]byte(nil), b...)
		for i := range min(8, len(out)) {
			out[i] ^= 0xff
		}
		return out
	}},
	{"huge-counts", func(b []byte, _ *rand.Rand) []byte {
		out := append([]byte(nil), b...)
		for i := 4; i+4 <= min(256, len(out)); i += 4 {
			binary.LittleEndian.PutUint32(out[i:], 0x7fffffff)
		}
		return out
	}},
	{"random", func(b []byte, rng *rand.Rand) []byte {
		out := make([]byte, len(b))
		for i := range out {
			out[i] = byte(rng.Uint32())
		}
		return out
	}},
}

// MalformedCase is one damaged copy of a checkpoint.
type MalformedCase struct {
	Checkpoint string // the checkpoint's name
	File       string // the damaged file, relative to the checkpoint
	Damage     string // the Malformation's name
}

// String names the case.
func (c MalformedCase) String() string {
	return fmt.Sprintf("%s/%s/%s", c.Checkpoint, c.File, c.Damage)
}

// MalformedCases lists every (checkpoint, file, damage) of cat; a
// checkpoint without files (flite's compiled-in voices) has none.
func MalformedCases(cat *catalogue.Catalogue) []MalformedCase {
	var out []MalformedCase
	for _, name := range cat.Names() {
		cp, _ := cat.Get(name)
		for _, f := range cp.Manifest.Files {
			for _, m := range Malformations {
				out = append(out, MalformedCase{Checkpoint: name, File: f.Path, Damage: m.Name})
			}
		}
	}
	return out
}

// Damage writes into dst a copy of the checkpoint folder src with c's
// damage applied and its manifest rewritten for the files now in it
// (sizes and hashes), so that only the engine's own checks of the files
// can refuse it; it returns dst's checkpoint folder.
func Damage(src, dst string, c MalformedCase, seed uint64) (string, error) {
	var m *Malformation
	for i := range Malformations {
		if Malformations[i].Name == c.Damage {
			m = &Malformations[i]
		}
	}
	if m == nil {
		return "", fmt.Errorf("damage %q unknown", c.Damage)
	}
	dir := filepath.Join(dst, filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.ToSlash(rel) == c.File {
			b = m.F(b, rand.New(rand.NewPCG(seed, uint64(len(b)))))
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		return "", err
	}
	return dir, remanifest(dir)
}

// remanifest rewrites dir's manifest with its files' present sizes and
// hashes.
func remanifest(dir string) error {
	mp := filepath.Join(dir, catalogue.ManifestName)
	b, err := os.ReadFile(mp)
	if err != nil {
		return err
	}
	m, err := catalogue.ParseManifest(b)
	if err != nil {
		return err
	}
	for i, f := range m.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		m.Files[i].Size = st.Size()
		if m.Files[i].SHA256, err = catalogue.HashFile(p); err != nil {
			return err
		}
	}
	out, err := m.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(mp, out, 0o644)
}
