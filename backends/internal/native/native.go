// Package native holds the small purego helpers the real engines share:
// opening a shared library with a clear error, C memory from libc (malloc,
// free, strings) and reading C structs.
//
// Threading rule: every function here is safe for concurrent use. C memory
// returned by Malloc and CString belongs to the caller until Free.
//
// Why C memory: purego calls follow the cgo pointer rules, and an
// out-parameter or a buffer that a native library keeps must not live on a
// goroutine stack (which can move) nor in Go memory the collector may free.
// Every engine therefore passes only C memory to its library.
package native

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrUnavailable marks a native library (or its data) that is not installed.
var ErrUnavailable = errors.New("native library unavailable")

// Open dlopens the first of names that loads (RTLD_NOW|RTLD_GLOBAL). The
// error wraps ErrUnavailable and names every candidate and the hint (for
// example the Debian package to install).
func Open(hint string, names ...string) (uintptr, error) {
	if len(names) == 0 || names[0] != "libc.so.6" {
		loadMalloc() // the arena limit, before any engine library allocates (trim.go)
	}
	var msgs []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, nil
		}
		msgs = append(msgs, err.Error())
	}
	return 0, fmt.Errorf("%w: %s (%s)", ErrUnavailable, strings.Join(names, ", "), hint+"; "+strings.Join(msgs, "; "))
}

// Sym returns the address of symbol name in lib, or an error naming it.
func Sym(lib uintptr, name string) (uintptr, error) {
	p, err := purego.Dlsym(lib, name)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%w: symbol %s: %v", ErrUnavailable, name, err)
	}
	return p, nil
}

// Bind resolves each symbol name into the matching function pointer of fns
// (pairs of *func and name), returning the first missing symbol as an error
// instead of purego's panic.
func Bind(lib uintptr, pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		name := pairs[i+1].(string)
		p, err := Sym(lib, name)
		if err != nil {
			return err
		}
		purego.RegisterFunc(pairs[i], p)
	}
	return nil
}

var (
	libcOnce sync.Once
	libcErr  error
	cMalloc  func(n uintptr) unsafe.Pointer
	cCalloc  func(n, size uintptr) unsafe.Pointer
	cFree    func(p unsafe.Pointer)
	cStrlen  func(p unsafe.Pointer) uintptr
)

func loadLibc() error {
	libcOnce.Do(func() {
		var h uintptr
		h, libcErr = Open("the C library", "libc.so.6")
		if libcErr != nil {
			return
		}
		libcErr = Bind(h, &cMalloc, "malloc", &cCalloc, "calloc", &cFree, "free", &cStrlen, "strlen")
	})
	return libcErr
}

func mustLibc() {
	if err := loadLibc(); err != nil {
		panic(err)
	}
}

// Malloc returns n zeroed bytes of C memory (at least one byte). It panics
// when the allocation fails, like the Go runtime does.
func Malloc(n int) unsafe.Pointer {
	mustLibc()
	if n < 1 {
		n = 1
	}
	p := cCalloc(uintptr(n), 1)
	if p == nil {
		panic(fmt.Sprintf("native: calloc(%d) failed", n))
	}
	return p
}

// Free releases C memory from Malloc or CString; nil is a no-op.
func Free(p unsafe.Pointer) {
	if p == nil {
		return
	}
	mustLibc()
	cFree(p)
}

// CString copies s into NUL-terminated C memory the caller must Free. A NUL
// inside s ends the C string there.
func CString(s string) unsafe.Pointer {
	p := Malloc(len(s) + 1)
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return p
}

// GoString copies the NUL-terminated C string at p; nil gives "".
func GoString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	mustLibc()
	n := cStrlen(p)
	return string(unsafe.Slice((*byte)(p), n))
}

// CStrings copies ss into a C array of C strings (argv style, NULL
// terminated). Free it with FreeCStrings.
func CStrings(ss []string) unsafe.Pointer {
	arr := Malloc((len(ss) + 1) * 8)
	slots := unsafe.Slice((*unsafe.Pointer)(arr), len(ss)+1)
	for i, s := range ss {
		slots[i] = CString(s)
	}
	return arr
}

// FreeCStrings frees an array made by CStrings with n strings.
func FreeCStrings(arr unsafe.Pointer, n int) {
	if arr == nil {
		return
	}
	for _, p := range unsafe.Slice((*unsafe.Pointer)(arr), n) {
		Free(p)
	}
	Free(arr)
}

// Ptr reinterprets a C address (from Dlsym or a function table) as a
// pointer without the uintptr-to-pointer conversion vet rightly warns
// about for Go memory: addr must be C memory.
func Ptr(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

// Uintptr reads the pointer-sized word at p+off.
func Uintptr(p unsafe.Pointer, off uintptr) uintptr {
	return *(*uintptr)(unsafe.Add(p, off))
}

// Int32 reads the int32 at p+off.
func Int32(p unsafe.Pointer, off uintptr) int32 {
	return *(*int32)(unsafe.Add(p, off))
}

// RequireEngines reports whether SLUICE_REQUIRE_ENGINES is set: tests then
// fail instead of skipping when a native library is missing.
func RequireEngines() bool {
	return os.Getenv("SLUICE_REQUIRE_ENGINES") != ""
}

// TB is the part of testing.TB that SkipUnavailable needs.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// SkipUnavailable ends a test whose engine is not installed: it skips with
// the reason, or fails when SLUICE_REQUIRE_ENGINES is set (CI sets it, so a
// missing prerequisite is a failure there). A nil err does nothing.
func SkipUnavailable(t TB, err error) {
	if err == nil {
		return
	}
	t.Helper()
	if RequireEngines() {
		t.Fatalf("engine required (SLUICE_REQUIRE_ENGINES is set) but unavailable: %v", err)
	}
	t.Skipf("engine not installed, skipping (run `make deps`, or set SLUICE_REQUIRE_ENGINES=1 to fail instead): %v", err)
}

// SourceHash is the build folder name of a shim compiled from embedded
// sources: the first 12 hex digits of the SHA-256 of parts in order, as
// the shims' build.sh scripts compute it (sha256sum of the files
// concatenated), so a changed source is a new folder, never a stale
// library.
func SourceHash(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// ModuleRoot returns the nearest folder at or above the working directory
// that holds go.mod, or "": where `make deps` puts .deps/ in a checkout.
func ModuleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}
