package catalogue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// hashCounter counts the bytes hashed under one folder (hashRead).
type hashCounter struct {
	mu    sync.Mutex
	under string
	bytes int64
	after func(path string, n int) // called outside mu, when set
}

func countHashes(t *testing.T, under string) *hashCounter {
	t.Helper()
	c := &hashCounter{under: under}
	hashRead = func(p string, n int) {
		if !strings.HasPrefix(p, c.under) {
			return
		}
		c.mu.Lock()
		c.bytes += int64(n)
		after := c.after
		c.mu.Unlock()
		if after != nil {
			after(p, n)
		}
	}
	t.Cleanup(func() { hashRead = nil })
	return c
}

func (c *hashCounter) take() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.bytes
	c.bytes = 0
	return n
}

// A second scan of unchanged files hashes nothing, also when a file did not
// match its manifest: the mismatch is cached by file identity too, and a
// file changed since is hashed again.
func TestSecondScanHashesNothing(t *testing.T) {
	root := realPathOf(t, t.TempDir())
	build(t, root, fixture(t, "alpha"), fixture(t, "beta"))
	bad := filepath.Join(root, "beta", "weights.bin")
	if err := os.WriteFile(bad, []byte("0123456789abcdeZ"), 0o644); err != nil { // same size
		t.Fatal(err)
	}
	c := countHashes(t, root)
	for i := 0; i < 3; i++ {
		_, err := Scan(root, ScanOptions{})
		isInvalid(t, "scan with a corrupt file", err)
		if err == nil || !strings.Contains(err.Error(), "SHA-256") {
			t.Fatalf("scan %d: %v", i, err)
		}
		n := c.take()
		switch {
		case i == 0 && n == 0:
			t.Fatal("the first scan hashed nothing")
		case i > 0 && n != 0:
			t.Fatalf("scan %d hashed %d bytes of unchanged files", i, n)
		}
	}
	// Replaced (new modification time): hashed again, once.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(bad, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := Scan(root, ScanOptions{}); err == nil {
		t.Fatal("a corrupt file passed")
	}
	if n := c.take(); n != 16 {
		t.Fatalf("a touched file: %d bytes hashed, want its 16", n)
	}
	if _, err := Scan(root, ScanOptions{}); err == nil {
		t.Fatal("a corrupt file passed")
	}
	if n := c.take(); n != 0 {
		t.Fatalf("after the touch, a further scan hashed %d bytes", n)
	}
}

// A scan whose context ends stops hashing within one block, and its error
// is the context's, not the folder's fault.
func TestScanCancelStopsHashing(t *testing.T) {
	root := realPathOf(t, t.TempDir())
	r := fixture(t, "big")
	big := filepath.Join(t.TempDir(), "big.bin")
	const size = 64 * hashBlock
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	f.Close()
	r.Files = append(r.Files, Source{Dest: "big.bin", Src: big})
	build(t, root, r)
	// A new identity, so the build's hash does not count as cached.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, "big", "big.bin"), later, later); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := countHashes(t, root)
	var mu sync.Mutex
	var before, after int64
	cancelled := false
	c.after = func(p string, n int) {
		if !strings.HasSuffix(p, "big.bin") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if cancelled {
			after += int64(n)
			return
		}
		before += int64(n)
		if before >= 2*hashBlock {
			cancel()
			cancelled = true
		}
	}
	_, err = ScanContext(ctx, root, ScanOptions{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("got %v, want context.Canceled and not ErrInvalid", err)
	}
	mu.Lock()
	c.after = nil
	if !cancelled || after > hashBlock {
		t.Fatalf("read %d bytes after the cancel (at %d of %d), want at most one block (%d)", after, before, size, hashBlock)
	}
	t.Logf("cancelled after %d of %d bytes; %d bytes read after the cancel", before, size, after)
	mu.Unlock()
	// The stopped hash is not cached: a scan with time to finish hashes
	// the file whole and passes.
	c.take()
	if _, err := Scan(root, ScanOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := c.take(); n < size {
		t.Fatalf("the scan after a cancel hashed %d bytes, want the whole %d", n, size)
	}
}

func realPathOf(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
