package onnx

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// apiVersion is the OrtApi version requested: old enough for any ONNX
// Runtime 1.17+, and the table only ever grows, so the indices below hold.
const apiVersion = 17

// Indices into the OrtApi function table (onnxruntime_c_api.h order).
const (
	idxGetErrorCode              = 1
	idxGetErrorMessage           = 2
	idxCreateEnv                 = 3
	idxCreateSession             = 7
	idxRun                       = 9
	idxCreateSessionOptions      = 10
	idxSetSessionExecutionMode   = 13
	idxDisableCPUMemArena        = 19
	idxSetSessionLogSeverity     = 22
	idxSetGraphOptimizationLevel = 23
	idxSetIntraOpNumThreads      = 24
	idxSetInterOpNumThreads      = 25
	idxSessionGetInputCount      = 30
	idxSessionGetOutputCount     = 31
	idxSessionGetInputName       = 36
	idxSessionGetOutputName      = 37
	idxCreateRunOptions          = 39
	idxRunOptionsSetLogSeverity  = 41
	idxRunOptionsSetTerminate    = 46
	idxRunOptionsUnsetTerminate  = 47
	idxCreateTensorWithData      = 49
	idxCreateCPUMemoryInfo       = 69
	idxAllocatorFree             = 76
	idxGetDefaultAllocator       = 78
	idxReleaseEnv                = 92
	idxReleaseStatus             = 93
	idxReleaseMemoryInfo         = 94
	idxReleaseSession            = 95
	idxReleaseValue              = 96
	idxReleaseRunOptions         = 97
	idxReleaseSessionOptions     = 100
	idxGetAvailableProviders     = 125
	idxReleaseAvailableProviders = 126
	idxAddSessionConfigEntry     = 130
	idxCreatePrepackedContainer  = 166
	idxReleasePrepackedContainer = 167
	idxCreateSessionPrepacked    = 168
	idxAppendCUDAV2              = 204
	idxCreateCUDAProviderOptions = 205
	idxReleaseCUDAProviderOpts   = 208
)

// ONNX Runtime enum values used here.
const (
	logLevelError    = 3  // ORT_LOGGING_LEVEL_ERROR
	logLevelFatal    = 4  // ORT_LOGGING_LEVEL_FATAL
	optimizeAll      = 99 // ORT_ENABLE_ALL
	sequential       = 0  // ORT_SEQUENTIAL
	arenaAllocator   = 1  // OrtArenaAllocator
	memTypeDefault   = 0  // OrtMemTypeDefault
	tensorFloat      = 1  // ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
	tensorInt64      = 7  // ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
	cudaProviderName = "CUDAExecutionProvider"
)

type status = unsafe.Pointer // OrtStatus*, nil on success

// ort is the loaded ONNX Runtime: its function table, one environment and
// the CPU memory description, shared by every session of the process.
type ort struct {
	version string
	path    string
	env     unsafe.Pointer
	cpuMem  unsafe.Pointer
	alloc   unsafe.Pointer // default allocator (names returned by ORT)
	runFn   uintptr        // OrtApi Run, for the Silero shim's loop

	getErrorCode         func(st status) int32
	getErrorMessage      func(st status) unsafe.Pointer
	releaseStatus        func(st status)
	createEnv            func(level int32, logid unsafe.Pointer, out unsafe.Pointer) status
	createSession        func(env, path, opts, out unsafe.Pointer) status
	run                  func(sess, ro, inNames, inputs unsafe.Pointer, nIn uintptr, outNames unsafe.Pointer, nOut uintptr, outputs unsafe.Pointer) status
	createSessionOptions func(out unsafe.Pointer) status
	setExecutionMode     func(opts unsafe.Pointer, mode int32) status
	setLogSeverity       func(opts unsafe.Pointer, level int32) status
	setOptimization      func(opts unsafe.Pointer, level int32) status
	setIntraOp           func(opts unsafe.Pointer, n int32) status
	setInterOp           func(opts unsafe.Pointer, n int32) status
	inputCount           func(sess, out unsafe.Pointer) status
	outputCount          func(sess, out unsafe.Pointer) status
	inputName            func(sess unsafe.Pointer, i uintptr, alloc, out unsafe.Pointer) status
	outputName           func(sess unsafe.Pointer, i uintptr, alloc, out unsafe.Pointer) status
	createRunOptions     func(out unsafe.Pointer) status
	setRunLogSeverity    func(ro unsafe.Pointer, level int32) status
	setTerminate         func(ro unsafe.Pointer) status
	unsetTerminate       func(ro unsafe.Pointer) status
	createTensor         func(info, data unsafe.Pointer, n uintptr, shape unsafe.Pointer, dims uintptr, typ int32, out unsafe.Pointer) status
	createCPUMemoryInfo  func(alloc, mem int32, out unsafe.Pointer) status
	allocatorFree        func(alloc, p unsafe.Pointer) status
	defaultAllocator     func(out unsafe.Pointer) status
	releaseMemoryInfo    func(p unsafe.Pointer)
	releaseSession       func(p unsafe.Pointer)
	releaseValue         func(p unsafe.Pointer)
	releaseRunOptions    func(p unsafe.Pointer)
	releaseSessionOpts   func(p unsafe.Pointer)
	availableProviders   func(out, n unsafe.Pointer) status
	releaseProviders     func(list unsafe.Pointer, n int32) status
	appendCUDAV2         func(opts, cudaOpts unsafe.Pointer) status
	disableCPUArena      func(opts unsafe.Pointer) status
	addConfigEntry       func(opts, key, value unsafe.Pointer) status
	createPrepacked      func(out unsafe.Pointer) status
	releasePrepacked     func(p unsafe.Pointer)
	createSessionShared  func(env, path, opts, container, out unsafe.Pointer) status
	createCUDAOptions    func(out unsafe.Pointer) status
	releaseCUDAOptions   func(p unsafe.Pointer)
}

var (
	ortMu   sync.Mutex
	theOrt  *ort
	ortErrs = map[string]error{}
)

// DefaultLibrary returns the ONNX Runtime library to load:
// SLUICE_ONNXRUNTIME_LIB, else the one in onnxruntime-node under the npm
// prefix (`make deps` installs it there), else libonnxruntime.so.1 from the
// system's library path.
func DefaultLibrary() string {
	if p := os.Getenv("SLUICE_ONNXRUNTIME_LIB"); p != "" {
		return p
	}
	p := filepath.Join(catalogue.DefaultNPMPrefix(), "node_modules", "onnxruntime-node", "bin", "napi-v6", "linux", "x64", "libonnxruntime.so.1")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "libonnxruntime.so.1"
}

// loadOrt loads ONNX Runtime from path once per process. A later call with
// another path is refused: one runtime serves the whole process.
func loadOrt(path string) (*ort, error) {
	ortMu.Lock()
	defer ortMu.Unlock()
	if theOrt != nil {
		if theOrt.path != path {
			return nil, fmt.Errorf("onnx: ONNX Runtime is already loaded from %s; cannot also load %s", theOrt.path, path)
		}
		return theOrt, nil
	}
	if err, ok := ortErrs[path]; ok {
		return nil, err
	}
	o, err := openOrt(path)
	if err != nil {
		ortErrs[path] = err
		return nil, err
	}
	theOrt = o
	return o, nil
}

func openOrt(path string) (*ort, error) {
	h, err := native.Open("install onnxruntime-node with `make deps`, or set SLUICE_ONNXRUNTIME_LIB", path)
	if err != nil {
		return nil, err
	}
	var getAPIBase func() unsafe.Pointer
	if err := native.Bind(h, &getAPIBase, "OrtGetApiBase"); err != nil {
		return nil, err
	}
	base := getAPIBase()
	var getAPI func(version uint32) unsafe.Pointer
	var getVersion func() unsafe.Pointer
	purego.RegisterFunc(&getAPI, native.Uintptr(base, 0))
	purego.RegisterFunc(&getVersion, native.Uintptr(base, 8))
	o := &ort{path: path, version: native.GoString(getVersion())}
	api := getAPI(apiVersion)
	if api == nil {
		return nil, fmt.Errorf("onnx: ONNX Runtime %s does not provide API version %d", o.version, apiVersion)
	}
	for _, f := range []struct {
		fn  any
		idx uintptr
	}{
		{&o.getErrorCode, idxGetErrorCode}, {&o.getErrorMessage, idxGetErrorMessage}, {&o.releaseStatus, idxReleaseStatus},
		{&o.createEnv, idxCreateEnv}, {&o.createSession, idxCreateSession}, {&o.run, idxRun},
		{&o.createSessionOptions, idxCreateSessionOptions}, {&o.setExecutionMode, idxSetSessionExecutionMode},
		{&o.setLogSeverity, idxSetSessionLogSeverity}, {&o.setOptimization, idxSetGraphOptimizationLevel},
		{&o.setIntraOp, idxSetIntraOpNumThreads}, {&o.setInterOp, idxSetInterOpNumThreads},
		{&o.inputCount, idxSessionGetInputCount}, {&o.outputCount, idxSessionGetOutputCount},
		{&o.inputName, idxSessionGetInputName}, {&o.outputName, idxSessionGetOutputName},
		{&o.createRunOptions, idxCreateRunOptions}, {&o.setRunLogSeverity, idxRunOptionsSetLogSeverity},
		{&o.setTerminate, idxRunOptionsSetTerminate},
		{&o.unsetTerminate, idxRunOptionsUnsetTerminate}, {&o.createTensor, idxCreateTensorWithData},
		{&o.createCPUMemoryInfo, idxCreateCPUMemoryInfo}, {&o.allocatorFree, idxAllocatorFree},
		{&o.defaultAllocator, idxGetDefaultAllocator}, {&o.releaseMemoryInfo, idxReleaseMemoryInfo},
		{&o.releaseSession, idxReleaseSession}, {&o.releaseValue, idxReleaseValue},
		{&o.releaseRunOptions, idxReleaseRunOptions}, {&o.releaseSessionOpts, idxReleaseSessionOptions},
		{&o.availableProviders, idxGetAvailableProviders}, {&o.releaseProviders, idxReleaseAvailableProviders},
		{&o.appendCUDAV2, idxAppendCUDAV2}, {&o.createCUDAOptions, idxCreateCUDAProviderOptions},
		{&o.releaseCUDAOptions, idxReleaseCUDAProviderOpts},
		{&o.disableCPUArena, idxDisableCPUMemArena}, {&o.addConfigEntry, idxAddSessionConfigEntry},
		{&o.createPrepacked, idxCreatePrepackedContainer}, {&o.releasePrepacked, idxReleasePrepackedContainer},
		{&o.createSessionShared, idxCreateSessionPrepacked},
	} {
		fp := native.Uintptr(api, f.idx*8)
		if fp == 0 {
			return nil, fmt.Errorf("onnx: ONNX Runtime %s has no function at table index %d", o.version, f.idx)
		}
		purego.RegisterFunc(f.fn, fp)
	}
	o.runFn = native.Uintptr(api, idxRun*8)
	out := native.Malloc(8)
	defer native.Free(out)
	logid := native.CString("sluice")
	defer native.Free(logid)
	// Errors come back as statuses; the runtime's own log would repeat them
	// on stderr, so it only logs fatal conditions.
	if err := o.check(o.createEnv(logLevelFatal, logid, out), "create environment"); err != nil {
		return nil, err
	}
	o.env = native.Ptr(native.Uintptr(out, 0))
	if err := o.check(o.createCPUMemoryInfo(arenaAllocator, memTypeDefault, out), "CPU memory info"); err != nil {
		return nil, err
	}
	o.cpuMem = native.Ptr(native.Uintptr(out, 0))
	if err := o.check(o.defaultAllocator(out), "default allocator"); err != nil {
		return nil, err
	}
	o.alloc = native.Ptr(native.Uintptr(out, 0))
	// A sanity check of the table indices: the provider list must name the
	// CPU provider.
	provs, err := o.providers()
	if err != nil || !contains(provs, "CPUExecutionProvider") {
		return nil, fmt.Errorf("onnx: ONNX Runtime %s at %s: unexpected provider list %v (%v): API table mismatch", o.version, path, provs, err)
	}
	return o, nil
}

// OrtErrorCode values that blame the model or the request, not the server.
var invalidCodes = map[int32]bool{
	2:  true, // ORT_INVALID_ARGUMENT
	3:  true, // ORT_NO_SUCHFILE
	4:  true, // ORT_NO_MODEL
	7:  true, // ORT_INVALID_PROTOBUF
	10: true, // ORT_INVALID_GRAPH
}

// check turns an OrtStatus into an error (releasing the status); errors
// that blame the model wrap backends.ErrInvalid.
func (o *ort) check(st status, what string) error {
	if st == nil {
		return nil
	}
	code := o.getErrorCode(st)
	msg := native.GoString(o.getErrorMessage(st))
	o.releaseStatus(st)
	if invalidCodes[code] {
		return backends.Invalidf("onnx: %s: %s", what, msg)
	}
	return fmt.Errorf("onnx: %s: %s (ORT error %d)", what, msg, code)
}

// providers lists the execution providers this build of the runtime has.
func (o *ort) providers() ([]string, error) {
	out := native.Malloc(16)
	defer native.Free(out)
	if err := o.check(o.availableProviders(out, unsafe.Add(out, 8)), "available providers"); err != nil {
		return nil, err
	}
	list := native.Ptr(native.Uintptr(out, 0))
	n := int(native.Int32(out, 8))
	names := make([]string, n)
	for i := range names {
		names[i] = native.GoString(native.Ptr(native.Uintptr(list, uintptr(i)*8)))
	}
	_ = o.check(o.releaseProviders(list, int32(n)), "release providers")
	return names, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// tuning is how a session runs on the CPU: the ONNX Runtime session
// options a model's engine options choose (see Options).
type tuning struct {
	provider string
	threads  int  // intra-op threads (the calling thread is one of them)
	spinning bool // intra- and inter-op pool threads busy-wait for work
	noArena  bool // the CPU allocator without its arena (plain malloc)
}

// sessionOptions builds OrtSessionOptions for t. The caller releases them.
func (o *ort) sessionOptions(t tuning) (unsafe.Pointer, error) {
	out := native.Malloc(8)
	defer native.Free(out)
	if err := o.check(o.createSessionOptions(out), "session options"); err != nil {
		return nil, err
	}
	opts := native.Ptr(native.Uintptr(out, 0))
	err := o.check(o.setIntraOp(opts, int32(t.threads)), "intra-op threads")
	if err == nil {
		err = o.check(o.setInterOp(opts, 1), "inter-op threads")
	}
	if err == nil {
		err = o.check(o.setExecutionMode(opts, sequential), "execution mode")
	}
	if err == nil {
		err = o.check(o.setOptimization(opts, optimizeAll), "optimisation level")
	}
	if err == nil {
		err = o.check(o.setLogSeverity(opts, logLevelError), "log level")
	}
	if err == nil && !t.spinning {
		for _, key := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
			if err = o.configEntry(opts, key, "0"); err != nil {
				break
			}
		}
	}
	if err == nil && t.noArena {
		err = o.check(o.disableCPUArena(opts), "disable CPU arena")
	}
	if err == nil && t.provider == "cuda" {
		err = o.appendCUDA(opts)
	}
	if err != nil {
		o.releaseSessionOpts(opts)
		return nil, err
	}
	return opts, nil
}

// configEntry sets one session configuration entry
// (onnxruntime_session_options_config_keys.h).
func (o *ort) configEntry(opts unsafe.Pointer, key, value string) error {
	k, v := native.CString(key), native.CString(value)
	defer native.Free(k)
	defer native.Free(v)
	return o.check(o.addConfigEntry(opts, k, v), "session option "+key)
}

// prepacked is an OrtPrepackedWeightsContainer shared by the sessions of
// one pool, so their kernels' pre-packed copies of the weights are made
// once; it is released when the last of them closes.
type prepacked struct {
	o    *ort
	p    unsafe.Pointer
	refs atomic.Int32
}

func (o *ort) newPrepacked() (*prepacked, error) {
	out := native.Malloc(8)
	defer native.Free(out)
	if err := o.check(o.createPrepacked(out), "prepacked weights container"); err != nil {
		return nil, err
	}
	return &prepacked{o: o, p: native.Ptr(native.Uintptr(out, 0))}, nil
}

func (w *prepacked) acquire() *prepacked {
	w.refs.Add(1)
	return w
}

func (w *prepacked) release() {
	if w.refs.Add(-1) == 0 {
		w.o.releasePrepacked(w.p)
	}
}

// appendCUDA adds the CUDA execution provider, or says why it cannot.
func (o *ort) appendCUDA(opts unsafe.Pointer) error {
	provs, err := o.providers()
	if err != nil {
		return err
	}
	if !contains(provs, cudaProviderName) {
		return fmt.Errorf("onnx: provider cuda unavailable: ONNX Runtime %s was built without CUDA (providers: %s)", o.version, strings.Join(provs, ", "))
	}
	out := native.Malloc(8)
	defer native.Free(out)
	if err := o.check(o.createCUDAOptions(out), "CUDA provider options"); err != nil {
		return fmt.Errorf("onnx: provider cuda unavailable: %w", err)
	}
	cuda := native.Ptr(native.Uintptr(out, 0))
	defer o.releaseCUDAOptions(cuda)
	if err := o.check(o.appendCUDAV2(opts, cuda), "append CUDA provider"); err != nil {
		return fmt.Errorf("onnx: provider cuda unavailable (needs the CUDA provider library and CUDA/cuDNN on a GPU machine): %w", err)
	}
	return nil
}
