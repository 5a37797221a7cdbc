package whisper

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// The shim's source, build script and Vulkan compat header are embedded
// so that the loader computes the same build folder name as build.sh
// (their content's hash is part of it): a changed shim is a new folder,
// never a stale library.
var (
	//go:embed shim/shim.c
	shimSource []byte
	//go:embed shim/build.sh
	buildScript []byte
	//go:embed shim/vk_layer_settings_compat.h
	vkCompat []byte
)

// Version is the whisper.cpp version the library is built from.
const Version = "1.9.1"

// DefaultCPUVariants are the ggml CPU backend variants build.sh compiles
// unless SLUICE_WHISPER_CPU_VARIANTS names others: any x86-64, AVX2 and
// AVX-512. ggml picks the best one the running CPU executes.
const DefaultCPUVariants = "x64 haswell skylakex"

// BuildID returns the build folder name: build.sh's
// "1.9.1-<hash>-<backend>", the hash over the content of the shim, the
// build script, the Vulkan compat header and the CPU variant list. SLUICE_WHISPER_BACKEND (cpu, vulkan, cuda) and
// SLUICE_WHISPER_CPU_VARIANTS change it as they change build.sh's.
func BuildID() string {
	variants := os.Getenv("SLUICE_WHISPER_CPU_VARIANTS")
	if variants == "" {
		variants = DefaultCPUVariants
	}
	backend := os.Getenv("SLUICE_WHISPER_BACKEND")
	if backend == "" {
		backend = "cpu"
	}
	return Version + "-" + native.SourceHash(shimSource, buildScript, vkCompat, []byte(variants+"\n")) + "-" + backend
}

// LibraryPath returns SLUICE_WHISPER_LIB, else
// <module root>/.deps/whisper/<BuildID>/libsluice_whisper.so (make deps
// builds it; libwhisper, ggml and ggml's backend modules lie beside it).
func LibraryPath() string {
	if p := os.Getenv("SLUICE_WHISPER_LIB"); p != "" {
		return p
	}
	root := catalogue.ModuleRoot()
	if root == "" {
		root = "."
	}
	return filepath.Join(root, ".deps", "whisper", BuildID(), "libsluice_whisper.so")
}

// QuantizeTool returns whisper.cpp's quantize tool of the build (beside
// the library).
func QuantizeTool() string {
	return filepath.Join(filepath.Dir(LibraryPath()), "whisper-quantize")
}

// lib is the loaded libwhisper.so with Sluice's shim.
type lib struct {
	initFn    func(dir unsafe.Pointer) int32
	load      func(path, params unsafe.Pointer) unsafe.Pointer
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
	tokenize  func(ctx, text, tokens unsafe.Pointer, nMax int32) int32
	backendFn func() unsafe.Pointer
	versionFn func() unsafe.Pointer

	backend string // the ggml backends loaded: "CPU", or a GPU's and "CPU"
	devices int    // the ggml devices they found (the CPU is one)
	version string // whisper.cpp's own version string

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
			&l.initFn, "sluice_whisper_init",
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
			&l.tokenize, "whisper_tokenize",
			&l.backendFn, "sluice_whisper_backend",
			&l.versionFn, "sluice_whisper_version",
		); err != nil {
			theLibErr = fmt.Errorf("%w (%s is not a Sluice build of whisper.cpp %s: rebuild with make deps)", err, path, Version)
			return
		}
		dir := native.CString(filepath.Dir(path))
		devices := l.initFn(dir)
		native.Free(dir)
		l.backend, l.devices = native.GoString(l.backendFn()), int(devices)
		l.version = native.GoString(l.versionFn())
		// 1.5.0 is the benchmark baseline's build (shim/build-1.5.0.sh),
		// loaded only through SLUICE_WHISPER_LIB.
		if devices < 1 || (l.version != Version && l.version != "1.5.0") {
			theLibErr = fmt.Errorf("whisper: %s: whisper.cpp %q with %d ggml devices (backends %q), want %s with a CPU backend module beside it", path, l.version, devices, l.backend, Version)
			return
		}
		for id := range l.langMax() + 1 {
			l.langs = append(l.langs, native.GoString(l.langStr(id)))
		}
		theLib = l
	})
	return theLib, theLibErr
}

// Backends names the ggml backends the library loaded ("CPU", or for
// example "Vulkan,CPU") and the number of devices they found: a GPU
// build whose driver shows no device has one (the CPU), and option gpu
// then decodes on the CPU (whisper.cpp falls back silently).
func Backends() (string, int, error) {
	l, err := load()
	if err != nil {
		return "", 0, err
	}
	return l.backend, l.devices, nil
}

// Available reports whether the library can be loaded.
func Available() error {
	_, err := load()
	return err
}

// loadParams mirrors the shim's struct sluice_load_params.
type loadParams struct {
	useGPU    int32
	flashAttn int32
	dtwPreset int32 // whisper_alignment_heads_preset; 0: no DTW
	dtwNTop   int32 // with the top-most preset: how many text layers
	dtwNHeads int32
	_         int32
	dtwHeads  unsafe.Pointer // int32 pairs (text layer, head), C memory
}

// loadModel loads a model file into a context without a state, or returns
// the library's reason.
func (l *lib) loadModel(path string, lp loadParams, heads [][2]int32) (unsafe.Pointer, error) {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	cpath := native.CString(path)
	defer native.Free(cpath)
	mem := native.Malloc(int(unsafe.Sizeof(loadParams{})) + 8*max(1, len(heads)))
	defer native.Free(mem)
	hs := unsafe.Slice((*int32)(unsafe.Add(mem, unsafe.Sizeof(loadParams{}))), 2*max(1, len(heads)))
	for i, h := range heads {
		hs[2*i], hs[2*i+1] = h[0], h[1]
	}
	lp.dtwNHeads, lp.dtwHeads = int32(len(heads)), unsafe.Pointer(&hs[0])
	*(*loadParams)(mem) = lp
	ctx := l.load(cpath, mem)
	if ctx == nil {
		return nil, fmt.Errorf("whisper.cpp did not load %s: %s", filepath.Base(path), l.takeError())
	}
	return ctx, nil
}

// countTokens returns how many tokens text is in ctx's vocabulary, or
// more than limit when it is longer (whisper_tokenize reports the count
// it needed).
func (l *lib) countTokens(ctx unsafe.Pointer, text string, limit int) int {
	ct := native.CString(text)
	defer native.Free(ct)
	buf := native.Malloc(4 * (limit + 1))
	defer native.Free(buf)
	n := l.tokenize(ctx, ct, buf, int32(limit+1))
	if n < 0 {
		return int(-n)
	}
	return int(n)
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
	segmentFD       int32          // >= 0: the shim writes each new segment here (streaming)
	ackFD           int32          // with segmentFD: the shim reads one byte here after each segment
	bestOf          int32          // greedy decoders when temperature > 0; 0: whisper's default
	outLangID       int32          // out: the detected language's id, -1 when not detected
	outLangProb     float32        // out: its probability
}
