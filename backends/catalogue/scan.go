package catalogue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// ScanOptions tune Scan.
type ScanOptions struct {
	_ struct{}
	// Check, when set, is called for every loaded checkpoint (for example
	// to run the named engine's Validate); its error fails the scan.
	Check func(*Checkpoint) error
}

// Catalogue is a validated models root.
type Catalogue struct {
	Root   string // absolute, symlink-resolved
	names  []string
	byName map[string]*Checkpoint
}

// Scan loads every checkpoint folder under root. Hidden entries (a leading
// dot) are skipped; any other entry must be a checkpoint folder whose
// manifest names it. Every fault is collected and returned together, and a
// failed scan returns no catalogue. Errors wrap backends.ErrInvalid.
func Scan(root string, opts ScanOptions) (*Catalogue, error) {
	return ScanContext(context.Background(), root, opts)
}

// ScanContext is Scan that stops when ctx ends: between entries, and
// between blocks while hashing a file (LoadContext). The error then wraps
// ctx.Err() alone, not backends.ErrInvalid.
func ScanContext(ctx context.Context, root string, opts ScanOptions) (*Catalogue, error) {
	real, err := realDir(root)
	if err != nil {
		return nil, fmt.Errorf("models root: %w", err)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return nil, backends.Invalidf("models root %s: %v", real, unwrapPathErr(err))
	}
	c := &Catalogue{Root: real, byName: map[string]*Checkpoint{}}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("models root %s: scan stopped: %w", real, err)
		}
		cp, err := scanOne(ctx, real, name)
		if err == nil && opts.Check != nil {
			err = opts.Check(cp)
			if err != nil {
				err = fmt.Errorf("checkpoint %q: %w", name, err)
			}
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, fmt.Errorf("models root %s: scan stopped: %w", real, cerr)
			}
			errs = append(errs, err)
			continue
		}
		c.byName[name] = cp
		c.names = append(c.names, name)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("models root %s: %w", real, errors.Join(errs...))
	}
	sort.Strings(c.names)
	return c, nil
}

func scanOne(ctx context.Context, root, name string) (*Checkpoint, error) {
	if !ValidName(name) {
		return nil, backends.Invalidf("entry %q: not a valid checkpoint name", name)
	}
	st, err := os.Lstat(filepath.Join(root, name))
	if err != nil {
		return nil, backends.Invalidf("entry %q: %v", name, unwrapPathErr(err))
	}
	if !st.IsDir() && st.Mode()&os.ModeSymlink == 0 {
		return nil, backends.Invalidf("entry %q is not a checkpoint folder", name)
	}
	dir, err := Within(root, name)
	if err != nil {
		return nil, fmt.Errorf("entry %q: %w", name, err)
	}
	cp, err := LoadContext(ctx, dir)
	if err != nil {
		return nil, err
	}
	if cp.Name != name {
		return nil, backends.Invalidf("checkpoint folder %q: manifest names it %q", name, cp.Name)
	}
	return cp, nil
}

// Names returns the checkpoint names in order.
func (c *Catalogue) Names() []string { return append([]string(nil), c.names...) }

// Get returns the named checkpoint.
func (c *Catalogue) Get(name string) (*Checkpoint, bool) {
	cp, ok := c.byName[name]
	return cp, ok
}

// Resolve maps a checkpoint reference from a model spec (a checkpoint name,
// or a relative path that names one) to its verified checkpoint. References
// with "..", absolute paths or symlinks leaving the root are refused, as
// are names not in the catalogue. The files are re-verified (cheaply, see
// Load) so a file changed since the scan is caught. Errors wrap
// backends.ErrInvalid.
func (c *Catalogue) Resolve(ref string) (*Checkpoint, error) {
	if err := CheckRelPath(ref); err != nil {
		return nil, fmt.Errorf("checkpoint %q: %w", ref, err)
	}
	dir, err := Within(c.Root, ref)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %q: %w", ref, err)
	}
	rel, err := filepath.Rel(c.Root, dir)
	if err != nil {
		return nil, backends.Invalidf("checkpoint %q: %v", ref, err)
	}
	cp, ok := c.byName[filepath.ToSlash(rel)]
	if !ok {
		return nil, backends.Invalidf("checkpoint %q is not in the catalogue (have %s)", ref, strings.Join(c.names, ", "))
	}
	if err := cp.Verify(); err != nil {
		return nil, err
	}
	return cp, nil
}
