// Package childload loads a checkpoint first in a child process, for
// engines whose native library can end the process on a malformed file
// (a segmentation fault, exit(), an uncaught C++ exception): the child is
// this executable, re-executed with an engine's environment variable set
// to the load's description; it loads, serves one small request and exits
// 0. A child that ends otherwise, or runs past its timeout, fails the
// load as invalid with its stderr's head and tail, and the parent never
// hands the files to the library (CONTRACT.md engine.load-safety).
// backends/sherpa has its own copy of this scheme (it came first).
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
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// Prober runs one engine's child loads.
type Prober struct {
	Env     string        // the environment variable carrying a child's payload
	Timeout time.Duration // one child's limit
	passed  sync.Map      // key -> true: loads that passed (an identical one is not repeated)
}

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
	out := &headTail{max: 1024}
	cmd.Stderr = out
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return backends.Invalidf("%s failed to load in a child process (%v), so it is not loaded here: %s", what, err, out)
	}
	p.passed.Store(key, true)
	return nil
}

// headTail keeps the first and the last max bytes written to it (a
// crash's first lines name the signal, its last ones the frames).
type headTail struct {
	mu         sync.Mutex
	max        int
	head, tail bytes.Buffer
	cut        bool
}

func (t *headTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := t.max - t.head.Len(); room > 0 {
		k := min(room, len(p))
		t.head.Write(p[:k])
		p = p[k:]
	}
	t.tail.Write(p)
	if over := t.tail.Len() - t.max; over > 0 {
		t.tail.Next(over)
		t.cut = true
	}
	return n, nil
}

// String returns what was kept, trimmed.
func (t *headTail) String() string {
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
