package engines

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/backends"
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

// MalformedShort picks the default test run's cases: for each checkpoint
// and damage, one of the checkpoint's files, drawn by a seeded PCG (the
// long form, `make validate-engines`, tries every file).
func MalformedShort(all []MalformedCase, seed uint64) []MalformedCase {
	byKey := map[string][]MalformedCase{}
	var keys []string
	for _, c := range all {
		k := c.Checkpoint + "/" + c.Damage
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	var out []MalformedCase
	for _, k := range keys {
		cs := byKey[k]
		out = append(out, cs[rng.IntN(len(cs))])
	}
	return out
}

// loadChecker is an engine whose load can be checked in a child process
// alone (espeak.Engine.CheckLoad).
type loadChecker interface {
	CheckLoad(ctx context.Context, spec backends.Spec) error
}

// LoadAndServe loads the checkpoint folder dir as a server would
// (catalogue, Validate, Open) and answers one standard request of task
// (in, or Inputs when nil). A damaged checkpoint's refusal is its error.
// Unless inChild (a process of its own for this load), an engine with
// process-global data (eSpeak NG) only has its load checked in a child.
func LoadAndServe(ctx context.Context, dir, task string, in map[string][]backends.Request, inChild bool) error {
	cp, err := catalogue.Load(dir)
	if err != nil {
		return err
	}
	eng, err := Registry(Config{}).Get(cp.Engine)
	if err != nil {
		return err
	}
	spec := SpecFor(cp.Name, cp, 1)
	if err := eng.Validate(spec); err != nil {
		return err
	}
	if lc, ok := eng.(loadChecker); ok && !inChild {
		// eSpeak NG: one data folder per process; the child load that
		// Open runs first, alone, so this process keeps its own folder.
		return lc.CheckLoad(ctx, spec)
	}
	s, _, err := eng.Open(ctx, spec)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	if in == nil {
		if in, err = Inputs(ctx, catalogue.DefaultSources("")); err != nil {
			return fmt.Errorf("inputs: %w", err)
		}
	}
	_, err = s.Infer(ctx, in[task][0], nil)
	return err
}

// ShortMalformed (the conformance case engine.load-safety) loads and
// serves MalformedShort's damaged copies of every checkpoint of cat in
// this process, under tmp: each must be refused as invalid or served; an
// engine that let a damaged file reach a library that crashes would end
// the process here. It returns how many were refused and served.
func ShortMalformed(ctx context.Context, cat *catalogue.Catalogue, in map[string][]backends.Request, tmp string) (refused, served int, err error) {
	var errs []error
	for i, c := range MalformedShort(MalformedCases(cat), 32) {
		cp, _ := cat.Get(c.Checkpoint)
		dst := filepath.Join(tmp, fmt.Sprint(i))
		dir, err := Damage(cp.Dir, dst, c, 32)
		if err != nil {
			return refused, served, err
		}
		switch err := LoadAndServe(ctx, dir, cp.Task, in, false); {
		case err == nil:
			served++
		case errors.Is(err, backends.ErrInvalid):
			refused++
		default:
			errs = append(errs, fmt.Errorf("%s: not refused as invalid: %w", c, err))
		}
		_ = os.RemoveAll(dst)
	}
	return refused, served, errors.Join(errs...)
}
