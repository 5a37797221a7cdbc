package whisper

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
// computes the same build folder name as build.sh (their hash is part of
// it): a changed shim is a new folder, never a stale library.
var (
	//go:embed shim/shim.c
	shimSource []byte
	//go:embed shim/build.sh
	buildScript []byte
)

// Version is the whisper.cpp version the library is built from.
const Version = "1.5.0"

// cpuFeatures are the SIMD features ggml 1.5.0 compiles for (whisper.cpp's
// Makefile's list), in build.sh's order.
var cpuFeatures = []string{"avx", "avx2", "fma", "f16c", "sse3", "ssse3"}

// BuildID returns the build folder name for this CPU: build.sh's
// "1.5.0-<hash>-<features>[-<backend>]". SLUICE_WHISPER_FEATURES and
// SLUICE_WHISPER_BACKEND (opencl, cuda) change it as they change build.sh's.
func BuildID() string {
	feat := os.Getenv("SLUICE_WHISPER_FEATURES")
	if feat == "" {
		feat = hostFeatures()
	}
	if feat == "" {
		feat = "none"
	}
	id := Version + "-" + native.SourceHash(shimSource, buildScript) + "-" + feat
	if b := os.Getenv("SLUICE_WHISPER_BACKEND"); b != "" && b != "cpu" {
		id += "-" + b
	}
	return id
}

// hostFeatures reads /proc/cpuinfo's first flags line.
func hostFeatures() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			break
		}
	}
	var have []string
	for _, f := range cpuFeatures {
		probe := f
		if f == "sse3" {
			probe = "pni"
		}
		if flags[probe] {
			have = append(have, f)
		}
	}
	return strings.Join(have, "_")
}

// LibraryPath returns SLUICE_WHISPER_LIB, else
// <module root>/.deps/whisper/<BuildID>/libwhisper.so (make deps builds it).
func LibraryPath() string {
	if p := os.Getenv("SLUICE_WHISPER_LIB"); p != "" {
		return p
	}
	root := catalogue.ModuleRoot()
	if root == "" {
		root = "."
	}
	return filepath.Join(root, ".deps", "whisper", BuildID(), "libwhisper.so")
}

// lib is the loaded libwhisper.so with Sluice's shim.
type lib struct {
	quiet     func()
	load      func(path unsafe.Pointer, useGPU int32) unsafe.Pointer
	lastError func(buf unsafe.Pointer, n int32)
	initState func(ctx unsafe.Pointer) unsafe.Pointer
	freeState func(state unsafe.Pointer)
	free      func(ctx unsafe.Pointer)
	full      func(ctx, state, req, samples unsafe.Pointer, n int32) int32
	nSegments func(state unsafe.Pointer) int32
	segT0     func(state unsafe.Pointer, i int32) int64
	segT1     func(state unsafe.Pointer, i int32) int64
	segText   func(state unsafe.Pointer, i int32) unsafe.Pointer
	nTokens   func(state unsafe.Pointer, i int32) int32
	tokText   func(ctx, state unsafe.Pointer, i, j int32) unsafe.Pointer
	token     func(ctx, state unsafe.Pointer, i, j int32, t unsafe.Pointer) int32
	langID    func(state unsafe.Pointer) int32
	langMax   func() int32
	langStr   func(id int32) unsafe.Pointer
	isMulti   func(ctx unsafe.Pointer) int32
	backendFn func() unsafe.Pointer

	backend string // "cpu", "opencl" or "cuda": the build's compute path

	langs []string // whisper's language codes by id

	loadMu sync.Mutex // model loads one at a time (the shim's last-error buffer is global)
}

var (
	libOnce   sync.Once
	theLib    *lib
	theLibErr error
)

func load() (*lib, error) {
	libOnce.Do(func() {
		path := LibraryPath()
		h, err := native.Open("build it with `make deps` (backends/whisper/shim/build.sh), or set SLUICE_WHISPER_LIB", path)
		if err != nil {
			theLibErr = err
			return
		}
		l := &lib{}
		if err := native.Bind(h,
			&l.quiet, "sluice_whisper_quiet",
			&l.load, "sluice_whisper_load",
			&l.lastError, "sluice_whisper_last_error",
			&l.full, "sluice_whisper_full",
			&l.token, "sluice_whisper_token",
			&l.initState, "whisper_init_state",
			&l.freeState, "whisper_free_state",
			&l.free, "whisper_free",
			&l.nSegments, "whisper_full_n_segments_from_state",
			&l.segT0, "whisper_full_get_segment_t0_from_state",
			&l.segT1, "whisper_full_get_segment_t1_from_state",
			&l.segText, "whisper_full_get_segment_text_from_state",
			&l.nTokens, "whisper_full_n_tokens_from_state",
			&l.tokText, "whisper_full_get_token_text_from_state",
			&l.langID, "whisper_full_lang_id_from_state",
			&l.langMax, "whisper_lang_max_id",
			&l.langStr, "whisper_lang_str",
			&l.isMulti, "whisper_is_multilingual",
			&l.backendFn, "sluice_whisper_backend",
		); err != nil {
			theLibErr = fmt.Errorf("%w (%s is not a Sluice build of whisper.cpp %s: rebuild with make deps)", err, path, Version)
			return
		}
		l.quiet()
		l.backend = native.GoString(l.backendFn())
		for id := range l.langMax() + 1 {
			l.langs = append(l.langs, native.GoString(l.langStr(id)))
		}
		theLib = l
	})
	return theLib, theLibErr
}

// Available reports whether the library can be loaded.
func Available() error {
	_, err := load()
	return err
}

// loadModel loads a model file into a context without a state, or returns
// the library's reason.
func (l *lib) loadModel(path string, useGPU bool) (unsafe.Pointer, error) {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	cpath := native.CString(path)
	defer native.Free(cpath)
	g := int32(0)
	if useGPU {
		g = 1
	}
	ctx := l.load(cpath, g)
	if ctx == nil {
		return nil, fmt.Errorf("whisper.cpp did not load %s: %s", filepath.Base(path), l.takeError())
	}
	return ctx, nil
}

// takeError returns and clears the library's last logged error.
func (l *lib) takeError() string {
	buf := native.Malloc(512)
	defer native.Free(buf)
	l.lastError(buf, 512)
	if s := native.GoString(buf); s != "" {
		return s
	}
	return "no reason logged"
}

// cReq mirrors the shim's struct sluice_req (backends/whisper/shim/shim.c).
type cReq struct {
	nThreads        int32
	translate       int32
	tokenTimestamps int32
	detectLanguage  int32
	language        unsafe.Pointer
	initialPrompt   unsafe.Pointer
	temperature     float32
	temperatureInc  float32
	beamSize        int32
	maxLen          int32
	abort           unsafe.Pointer // *int32 in C memory
	polls           unsafe.Pointer // *int64 in C memory
	notifyFD        int32          // >= 0: the shim writes one byte here at its first abort poll
	_               int32
}
