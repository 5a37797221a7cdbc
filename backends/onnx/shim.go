package onnx

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// The shim's source and build script are embedded so that the loader
// computes the same folder name as shim/build.sh (the hash of both): a
// changed shim is a new folder, never a stale library.
var (
	//go:embed shim/silero.c
	shimSource []byte
	//go:embed shim/build.sh
	shimScript []byte
)

// ShimBuildID returns the shim's build folder name: the first 12 hex
// digits of the SHA-256 of shim/silero.c followed by shim/build.sh.
func ShimBuildID() string {
	return native.SourceHash(shimSource, shimScript)
}

// ShimLibraries returns where the Silero shim library may be, in the
// order tried: SLUICE_ONNX_SHIM_LIB alone when it is set, else
// .deps/onnx-shim/<ShimBuildID>/libsluice_silero.so under the module root
// (`make deps` builds it there), then the same folder beside the npm prefix
// (make deps puts .deps/npm and .deps/onnx-shim side by side, so a process
// started elsewhere with SLUICE_NPM_PREFIX naming the repository's prefix,
// as deploy's tests do, finds both).
func ShimLibraries() []string {
	if p := os.Getenv("SLUICE_ONNX_SHIM_LIB"); p != "" {
		return []string{p}
	}
	rel := filepath.Join("onnx-shim", ShimBuildID(), "libsluice_silero.so")
	root := catalogue.ModuleRoot()
	if root == "" {
		root = "."
	}
	paths := []string{filepath.Join(root, ".deps", rel)}
	if p := filepath.Join(filepath.Dir(catalogue.DefaultNPMPrefix()), rel); p != paths[0] {
		paths = append(paths, p)
	}
	return paths
}

// shimState is struct sluice_silero of shim/silero.c, in C memory: what
// one session's windows need, filled once when the session opens.
type shimState struct {
	run         uintptr // OrtApi Run
	session     unsafe.Pointer
	runOptions  unsafe.Pointer
	inputNames  unsafe.Pointer
	outputNames unsafe.Pointer
	values      unsafe.Pointer
	in          unsafe.Pointer
	state       unsafe.Pointer
	prob        unsafe.Pointer
	stateOut    unsafe.Pointer
	done        int64 // windows the current call finished (written by C)
}

// shim is the loaded libsluice_silero.so.
type shim struct {
	// run runs every window of samples[0:n] into probs (one per window)
	// and returns the first failed Run's status, or nil.
	run func(s unsafe.Pointer, samples unsafe.Pointer, n int64, probs unsafe.Pointer) status
}

var (
	shimMu   sync.Mutex
	shims    = map[string]*shim{}
	shimErrs = map[string]error{}
)

// loadShim loads the shim from the first of ShimLibraries() that opens,
// once per process and list (a failure is remembered, like loadOrt's).
func loadShim() (*shim, error) {
	paths := ShimLibraries()
	path := strings.Join(paths, "\x00")
	shimMu.Lock()
	defer shimMu.Unlock()
	if s, ok := shims[path]; ok {
		return s, nil
	}
	if err, ok := shimErrs[path]; ok {
		return nil, err
	}
	s, err := openShim(paths)
	if err != nil {
		shimErrs[path] = err
		return nil, err
	}
	shims[path] = s
	return s, nil
}

func openShim(paths []string) (*shim, error) {
	h, err := native.Open("build it with `make deps` (backends/onnx/shim/build.sh), or set SLUICE_ONNX_SHIM_LIB", paths...)
	if err != nil {
		return nil, err
	}
	s := &shim{}
	var abi func() int32
	if err := native.Bind(h, &abi, "sluice_silero_abi", &s.run, "sluice_silero_run"); err != nil {
		return nil, fmt.Errorf("%w (%s is not Sluice's Silero shim: rebuild with make deps)", err, strings.Join(paths, " or "))
	}
	if got, want := abi(), int32(unsafe.Sizeof(shimState{})); got != want {
		return nil, fmt.Errorf("onnx: the Silero shim (%s) has a %d-byte state, this build expects %d: rebuild with make deps", strings.Join(paths, " or "), got, want)
	}
	return s, nil
}
