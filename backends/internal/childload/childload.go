// Package childload loads a checkpoint first in a child process, for
// engines whose native library can end the process on a malformed file
// (a segmentation fault, exit(), an uncaught C++ exception): the child is
// this executable, re-executed with an engine's environment variable set
// to the load's description; it loads, serves one small request and exits
// 0. A child that ends otherwise, or runs past its timeout, fails the
// load as invalid with its stderr's head and tail, and the parent never
// hands the files to the library (CONTRACT.md engine.load-safety).
// eSpeak NG, pocketsphinx and sherpa-onnx share it: each has a Prober
// (its own environment variable), a Loader (how its child opens a spec
// and which request it answers) and its own key of what a load depends
// on.
//
// Each engine calls Prober.Serve from its package's init, so any binary
// that links the engine (the server, test binaries) serves children
// before main or TestMain run.
//
// Threading rule: a Prober is safe for concurrent use.
package childload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// Prober runs one engine's child loads.
type Prober struct {
	Env     string        // the environment variable carrying a child's payload
	Timeout time.Duration // one child's limit
	passed  sync.Map      // key -> true: loads that passed (an identical one is not repeated)
	runs    atomic.Int64  // children started
}

// Runs returns how many children p started (tests and benchmarks).
func (p *Prober) Runs() int64 { return p.runs.Load() }

// Forget drops what p remembers of passed loads, so the next Check of
// each starts a child again (benchmarks of the child load).
func (p *Prober) Forget() { p.passed.Clear() }

// Serve, called from init, runs child (with its payload) and exits with
// its status when this process is one of p's children; otherwise it
// returns.
func (p *Prober) Serve(child func(payload string) int) {
	if v := os.Getenv(p.Env); v != "" {
		os.Exit(child(v))
	}
}

// InChild reports whether this process is one of p's children (whose own
// loads must not start children again).
func (p *Prober) InChild() bool { return os.Getenv(p.Env) != "" }

// Check loads payload in a child unless a load with the same key passed
// before in this process. what names the checkpoint in the error.
func (p *Prober) Check(ctx context.Context, key, payload, what string) error {
	if _, ok := p.passed.Load(key); ok {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("childload: the child load of %s needs this executable: %w", what, err)
	}
	cctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe)
	cmd.Env = append(os.Environ(), p.Env+"="+payload)
	out := &HeadTail{Max: 1024}
	cmd.Stderr = out
	cmd.Stdout = out
	start := time.Now()
	err = cmd.Run()
	p.runs.Add(1)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return backends.Invalidf("%s failed to load in a child process (%v), so it is not loaded here: %s", what, err, out)
	}
	slog.Debug("child load", slog.String("checkpoint", what), slog.Duration("took", time.Since(start)))
	p.passed.Store(key, true)
	return nil
}

// CheckSpec loads spec at one slot in a child (its JSON is the payload)
// unless this process is one of p's children or a load with the same key
// passed before. key maps the payload to what the load depends on
// (FilesKey, or an engine's own); what names the checkpoint in the error.
func (p *Prober) CheckSpec(ctx context.Context, spec backends.Spec, what string, key func(payload []byte) string) error {
	if p.InChild() {
		return nil
	}
	spec.Slots = 1
	payload, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("childload: %s: %w", what, err)
	}
	return p.Check(ctx, key(payload), string(payload), what)
}

// FilesKey is the key of a load that depends on the spec's bytes and the
// files under paths (Key).
func FilesKey(paths ...string) func(payload []byte) string {
	return func(payload []byte) string { return Key(payload, paths...) }
}

// Loader is what one engine's child does with the spec it is given.
type Loader struct {
	Name string // the engine, in the child's messages
	// Open opens the spec in the child (an engine that would probe
	// again in a child is told not to).
	Open func(ctx context.Context, spec backends.Spec) (backends.Session, error)
	// Request is the child's one small request to the session it opened.
	Request func(s backends.Session) backends.Request
}

// Main is a child's whole life, for Prober.Serve: decode the spec, open
// it, answer one request (its chunks discarded), close. The status says
// which step failed: 2 the spec, 3 the open, 4 the request, 5 the close.
func (l Loader) Main(payload string) int {
	var spec backends.Spec
	if err := json.Unmarshal([]byte(payload), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "%s child: spec: %v\n", l.Name, err)
		return 2
	}
	ctx := context.Background()
	s, err := l.Open(ctx, spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s child: open: %v\n", l.Name, err)
		return 3
	}
	discard := func(json.RawMessage) error { return nil }
	if _, err := s.Infer(ctx, l.Request(s), discard); err != nil {
		fmt.Fprintf(os.Stderr, "%s child: request: %v\n", l.Name, err)
		return 4
	}
	if err := s.Close(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s child: close: %v\n", l.Name, err)
		return 5
	}
	return 0
}

// HeadTail keeps the first and the last Max bytes written to it (a
// crash's first lines name the signal, its last ones the frames): a
// child's output, bounded. It is safe for concurrent use.
type HeadTail struct {
	Max        int
	mu         sync.Mutex
	head, tail bytes.Buffer
	cut        bool
}

// Write keeps p's bytes that fall in the head or the tail.
func (t *HeadTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := t.Max - t.head.Len(); room > 0 {
		k := min(room, len(p))
		t.head.Write(p[:k])
		p = p[k:]
	}
	t.tail.Write(p)
	if over := t.tail.Len() - t.Max; over > 0 {
		t.tail.Next(over)
		t.cut = true
	}
	return n, nil
}

// String returns what was kept, trimmed.
func (t *HeadTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	sep := ""
	if t.cut {
		sep = " [...] "
	}
	return string(bytes.TrimSpace([]byte(t.head.String() + sep + t.tail.String())))
}

// Key identifies a load by its spec's bytes and the size and modification
// time of every file under paths (files or folders): a changed file makes
// another key, so it is probed again.
func Key(spec []byte, paths ...string) string {
	h := sha256.New()
	h.Write(spec)
	for _, p := range paths {
		_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if st, err := d.Info(); err == nil {
				fmt.Fprintf(h, "\x00%s\x00%d\x00%d", q, st.Size(), st.ModTime().UnixNano())
			}
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))
}
