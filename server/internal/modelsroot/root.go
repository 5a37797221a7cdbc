// Package modelsroot is the server's models root (--models-root) and its
// catalogue, swapped together (CONTRACT.md fail.models-root), the answer
// shapes of GET /v1/catalogue and PUT /v1/settings/models-root, and the
// confinement of a spec's checkpoint inside the root (Resolve, Rel).
// It never imports package server: the server holds one Root and maps
// its errors with ScanError.
package modelsroot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sync"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Root is the models root and its catalogue, always swapped together
// (CONTRACT.md fail.models-root): readers see the old pair or the new one,
// never a mix. The configured root is scanned on first use; a failed scan
// at startup keeps the root for checkpoint resolution and reports why it has
// no catalogue.
//
// Threading rule: mu guards root, cat, err and scanned and is never held
// across a scan; swap (a one-token semaphore, so a waiter can give up with
// its context) serialises changes, and first serialises the first scan of
// the configured root. Readers take neither: while a change scans, they
// answer from the last completed scan.
type Root struct {
	engines backends.Registry // immutable
	// Commit, when set, makes a new root durable (--state-dir) after its
	// scan and before the swap; its failure keeps the old pair (CONTRACT.md
	// persist.models-root). Set once before serving.
	Commit func(root string) error
	// Scan scans a root (the package's Scan; tests wrap it). Set once
	// before serving.
	Scan func(ctx context.Context, root string) (*catalogue.Catalogue, error)

	swap  chan struct{}
	first sync.Mutex

	mu      sync.RWMutex
	root    string
	cat     *catalogue.Catalogue
	err     error // why cat is nil after a scan
	scanned bool
}

// New returns root, not scanned yet, whose checkpoints must be accepted by
// one of engines.
func New(root string, engines backends.Registry) *Root {
	m := &Root{root: root, engines: engines, swap: make(chan struct{}, 1)}
	m.Scan = func(ctx context.Context, root string) (*catalogue.Catalogue, error) {
		return Scan(ctx, root, engines)
	}
	return m
}

// Engines returns the engines the root's checkpoints are checked against:
// the server's.
func (m *Root) Engines() backends.Registry { return m.engines }

// Path returns the current models root.
func (m *Root) Path() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.root
}

// Current returns the root and its catalogue (nil with the reason when the
// root failed its scan), scanning the configured root on first use. A
// change of root in progress does not hold it up: it answers from the last
// completed scan. Only ctx ending during the first scan returns ctx's error
// (that scan is then done again by the next caller).
func (m *Root) Current(ctx context.Context) (string, *catalogue.Catalogue, error) {
	m.mu.RLock()
	root, cat, err, scanned := m.root, m.cat, m.err, m.scanned
	m.mu.RUnlock()
	if scanned {
		return root, cat, err
	}
	m.first.Lock()
	defer m.first.Unlock()
	m.mu.RLock()
	root, scanned = m.root, m.scanned
	m.mu.RUnlock()
	if !scanned {
		cat, err = m.Scan(ctx, root)
		if ctx.Err() != nil && err != nil {
			return root, nil, ctx.Err()
		}
		m.mu.Lock()
		if !m.scanned { // else a change completed meanwhile, and wins
			m.cat, m.err, m.scanned = cat, err, true
		}
		m.mu.Unlock()
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.root, m.cat, m.err
}

// Set scans root completely and only then swaps root and catalogue
// together; on any failure, ctx ending included (the scan stops then), the
// old pair stays as it was.
func (m *Root) Set(ctx context.Context, root string) (*catalogue.Catalogue, error) {
	select {
	case m.swap <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-m.swap }()
	cat, err := m.Scan(ctx, root)
	if err != nil {
		return nil, err
	}
	if m.Commit != nil {
		if err := m.Commit(cat.Root); err != nil {
			return nil, errNotDurable{err}
		}
	}
	m.mu.Lock()
	m.root, m.cat, m.err, m.scanned = cat.Root, cat, nil, true
	m.mu.Unlock()
	return cat, nil
}

// Scan is the server's adapter to catalogue.Scan: every
// checkpoint's manifest and files are verified, and its engine must be one
// this server serves and must accept the checkpoint at one slot (what
// backends/engines.ScanRoot does for the real engines, here for the
// server's own registry, the fixture included). Errors wrapping
// backends.ErrInvalid are the folder's fault; an engine panic is an
// internal fault. The scan stops when ctx ends (the client left).
func Scan(ctx context.Context, root string, engines backends.Registry) (cat *catalogue.Catalogue, err error) {
	if root == "" {
		return nil, backends.Invalidf("models root must not be empty")
	}
	return catalogue.ScanContext(ctx, root, catalogue.ScanOptions{Check: func(cp *catalogue.Checkpoint) (err error) {
		eng, err := engines.Get(cp.Engine)
		if err != nil {
			return fmt.Errorf("engine %q is not served by this server: %w", cp.Engine, err)
		}
		opts := cp.Options
		if len(opts) == 0 {
			opts = json.RawMessage("{}")
		}
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("engine %s panicked validating %s: %v", cp.Engine, cp.Name, p)
			}
		}()
		spec := backends.Spec{Model: cp.Name, Task: cp.Task, Engine: cp.Engine, Checkpoint: cp.Dir, Options: opts, Slots: 1}
		if err := eng.Validate(spec); err != nil {
			return fmt.Errorf("engine %s refused it: %w", cp.Engine, err)
		}
		return nil
	}})
}

// Checkpoint is one entry of GET /v1/catalogue: a checkpoint folder under
// the models root, its manifest and its parallel admission (the most slots
// it admits; an engine may admit fewer, which a load reports as 400).
type Checkpoint struct {
	ID       string             `json:"id"`     // the folder name: a model spec's checkpoint
	Object   string             `json:"object"` // always "checkpoint"
	Task     string             `json:"task"`
	Engine   string             `json:"engine"`
	MaxSlots int                `json:"max_slots"`
	Manifest catalogue.Manifest `json:"manifest"`
}

// List is the answer of GET /v1/catalogue and PUT
// /v1/settings/models-root.
type List struct {
	Object     string       `json:"object"` // always "list"
	ModelsRoot string       `json:"models_root"`
	Data       []Checkpoint `json:"data"`
	// Error says why the models root has no catalogue (it failed its scan
	// at startup); PUT /v1/settings/models-root replaces it.
	Error string `json:"error,omitempty"`
}

// ListOf is the answer for root and its catalogue, or for the reason
// scanErr it has none (which names nothing inside root).
func ListOf(root string, cat *catalogue.Catalogue, scanErr error) List {
	out := List{Object: "list", ModelsRoot: root, Data: []Checkpoint{}}
	if cat == nil {
		if scanErr != nil {
			out.Error = rootProblem(root, scanErr) // never the folder's entries (err.models-root-leak)
		}
		return out
	}
	out.ModelsRoot = cat.Root
	for _, name := range cat.Names() {
		cp, ok := cat.Get(name)
		if !ok {
			continue
		}
		m := cp.Manifest
		if m.Files == nil {
			m.Files = []catalogue.File{}
		}
		out.Data = append(out.Data, Checkpoint{ID: name, Object: "checkpoint", Task: m.Task, Engine: m.Engine,
			MaxSlots: m.Parallel.MaxSlots, Manifest: m})
	}
	return out
}

// errNotDurable is a models root that scanned but could not be recorded.
type errNotDurable struct{ err error }

func (e errNotDurable) Error() string { return "recording the models root: " + e.err.Error() }
func (e errNotDurable) Unwrap() error { return e.err }

// ScanError maps a failed scan of root (the path as the client gave it)
// to the API: the folder's fault is 400 invalid_request_error saying what
// is wrong with it, anything else 500. The message names root and nothing
// under it: a scan's reasons name every entry of the folder, which for
// /etc would list its contents (CONTRACT.md err.models-root-leak); they go
// to the server log instead (the server logs them).
func ScanError(root string, err error) *httpapi.Error {
	if errors.As(err, new(errNotDurable)) {
		return &httpapi.Error{Status: 500, Type: "internal_error", Message: "the models root could not be made durable in --state-dir; nothing changed", Err: err}
	}
	if errors.Is(err, backends.ErrInvalid) {
		return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_models_root",
			Message: "models root refused, nothing changed: " + rootProblem(root, err), Err: err}
	}
	return &httpapi.Error{Status: 500, Type: "internal_error", Message: "scanning the models root failed; nothing changed", Err: err}
}

// rootProblem says what is wrong with a models root that failed its scan,
// without naming anything inside it.
func rootProblem(root string, err error) string {
	if n := joinedCount(err); n > 0 {
		noun := "entries are not valid checkpoints"
		if n == 1 {
			noun = "entry is not a valid checkpoint"
		}
		return fmt.Sprintf("%q: %d of its %s (the server log names them)", root, n, noun)
	}
	st, serr := os.Stat(root)
	switch {
	case errors.Is(serr, fs.ErrNotExist):
		return fmt.Sprintf("%q does not exist", root)
	case errors.Is(serr, fs.ErrPermission):
		return fmt.Sprintf("%q cannot be read", root)
	case serr == nil && !st.IsDir():
		return fmt.Sprintf("%q is not a folder", root)
	}
	return fmt.Sprintf("%q cannot be read as a folder of checkpoints", root)
}

// joinedCount is the number of errors joined (errors.Join) somewhere in
// err's chain: a scan joins one error per refused entry.
func joinedCount(err error) int {
	for err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			return len(j.Unwrap())
		}
		err = errors.Unwrap(err)
	}
	return 0
}
