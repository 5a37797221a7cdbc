package sherpa

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Version is the sherpa-onnx release the binding is written for (the
// npm package sherpa-onnx-linux-x64 that `make deps` installs).
const Version = "1.13.8"

// NPMPackage is the npm package holding the library.
const NPMPackage = "sherpa-onnx-linux-x64"

// LibraryPath returns SLUICE_SHERPA_LIB, else libsherpa-onnx-c-api.so in
// the npm package under the npm prefix (SLUICE_NPM_PREFIX or the
// repository's .deps/npm).
func LibraryPath() string {
	if p := os.Getenv("SLUICE_SHERPA_LIB"); p != "" {
		return p
	}
	return filepath.Join(catalogue.DefaultNPMPrefix(), "node_modules", NPMPackage, "libsherpa-onnx-c-api.so")
}

// lib is the loaded C API.
type lib struct {
	path string

	createTTS       func(cfg unsafe.Pointer) uintptr
	destroyTTS      func(tts uintptr)
	ttsSampleRate   func(tts uintptr) int32
	ttsNumSpeakers  func(tts uintptr) int32
	ttsGenerate     func(tts uintptr, text unsafe.Pointer, cfg unsafe.Pointer, cb uintptr, arg uintptr) uintptr
	destroyAudio    func(a uintptr)
	createOffRec    func(cfg unsafe.Pointer) uintptr
	destroyOffRec   func(r uintptr)
	createOffStream func(r uintptr) uintptr
	offStreamHw     func(r uintptr, hotwords unsafe.Pointer) uintptr
	onStreamHw      func(r uintptr, hotwords unsafe.Pointer) uintptr
	destroyOffStr   func(s uintptr)
	acceptOff       func(s uintptr, rate int32, samples unsafe.Pointer, n int32)
	decodeOff       func(r, s uintptr)
	offResult       func(s uintptr) uintptr
	destroyOffRes   func(r uintptr)
	createOnRec     func(cfg unsafe.Pointer) uintptr
	destroyOnRec    func(r uintptr)
	createOnStream  func(r uintptr) uintptr
	destroyOnStr    func(s uintptr)
	acceptOn        func(s uintptr, rate int32, samples unsafe.Pointer, n int32)
	onReady         func(r, s uintptr) int32
	decodeOn        func(r, s uintptr)
	onResult        func(r, s uintptr) uintptr
	destroyOnRes    func(r uintptr)
	onReset         func(r, s uintptr)
	onFinished      func(s uintptr)
	onEndpoint      func(r, s uintptr) int32
	createSD        func(cfg unsafe.Pointer) uintptr
	destroySD       func(sd uintptr)
	sdSetConfig     func(sd uintptr, cfg unsafe.Pointer)
	sdProcess       func(sd uintptr, samples unsafe.Pointer, n int32) uintptr
	sdNumSegments   func(r uintptr) int32
	sdSorted        func(r uintptr) uintptr
	sdFreeSegments  func(s uintptr)
	sdFreeResult    func(r uintptr)
	createEx        func(cfg unsafe.Pointer) uintptr
	destroyEx       func(ex uintptr)
	exDim           func(ex uintptr) int32
	exStream        func(ex uintptr) uintptr
	exReady         func(ex, s uintptr) int32
	exCompute       func(ex, s uintptr) uintptr
	exFree          func(v uintptr)

	// progress is the one C callback (purego callbacks are never freed)
	// every generation goes through; arg is a key into gens.
	progress uintptr
}

var (
	libOnce sync.Once
	theLib  *lib
	libErr  error
)

// Available reports whether the sherpa-onnx C API loads.
func Available() error {
	_, err := load()
	return err
}

// load opens the library once, RTLD_LOCAL (see docs/design.md "sherpa-onnx
// beside onnxruntime-node"): its exports stay out of the global namespace,
// and its own libonnxruntime.so (soname libonnxruntime.so, symbols
// versioned VERS_1.28.2) is a different object from onnxruntime-node's
// (libonnxruntime.so.1, VERS_1.30.0), so neither binds the other's symbols.
func load() (*lib, error) {
	libOnce.Do(func() {
		p := LibraryPath()
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			libErr = fmt.Errorf("%w: %s (npm %s@%s, installed by make deps): %v", native.ErrUnavailable, p, NPMPackage, Version, err)
			return
		}
		l := &lib{path: p}
		if err := native.Bind(h,
			&l.createTTS, "SherpaOnnxCreateOfflineTts",
			&l.destroyTTS, "SherpaOnnxDestroyOfflineTts",
			&l.ttsSampleRate, "SherpaOnnxOfflineTtsSampleRate",
			&l.ttsNumSpeakers, "SherpaOnnxOfflineTtsNumSpeakers",
			&l.ttsGenerate, "SherpaOnnxOfflineTtsGenerateWithConfig",
			&l.destroyAudio, "SherpaOnnxDestroyOfflineTtsGeneratedAudio",
			&l.createOffRec, "SherpaOnnxCreateOfflineRecognizer",
			&l.destroyOffRec, "SherpaOnnxDestroyOfflineRecognizer",
			&l.createOffStream, "SherpaOnnxCreateOfflineStream",
			&l.offStreamHw, "SherpaOnnxCreateOfflineStreamWithHotwords",
			&l.onStreamHw, "SherpaOnnxCreateOnlineStreamWithHotwords",
			&l.destroyOffStr, "SherpaOnnxDestroyOfflineStream",
			&l.acceptOff, "SherpaOnnxAcceptWaveformOffline",
			&l.decodeOff, "SherpaOnnxDecodeOfflineStream",
			&l.offResult, "SherpaOnnxGetOfflineStreamResult",
			&l.destroyOffRes, "SherpaOnnxDestroyOfflineRecognizerResult",
			&l.createOnRec, "SherpaOnnxCreateOnlineRecognizer",
			&l.destroyOnRec, "SherpaOnnxDestroyOnlineRecognizer",
			&l.createOnStream, "SherpaOnnxCreateOnlineStream",
			&l.destroyOnStr, "SherpaOnnxDestroyOnlineStream",
			&l.acceptOn, "SherpaOnnxOnlineStreamAcceptWaveform",
			&l.onReady, "SherpaOnnxIsOnlineStreamReady",
			&l.decodeOn, "SherpaOnnxDecodeOnlineStream",
			&l.onResult, "SherpaOnnxGetOnlineStreamResult",
			&l.destroyOnRes, "SherpaOnnxDestroyOnlineRecognizerResult",
			&l.onReset, "SherpaOnnxOnlineStreamReset",
			&l.onFinished, "SherpaOnnxOnlineStreamInputFinished",
			&l.onEndpoint, "SherpaOnnxOnlineStreamIsEndpoint",
			&l.createSD, "SherpaOnnxCreateOfflineSpeakerDiarization",
			&l.destroySD, "SherpaOnnxDestroyOfflineSpeakerDiarization",
			&l.sdSetConfig, "SherpaOnnxOfflineSpeakerDiarizationSetConfig",
			&l.sdProcess, "SherpaOnnxOfflineSpeakerDiarizationProcess",
			&l.sdNumSegments, "SherpaOnnxOfflineSpeakerDiarizationResultGetNumSegments",
			&l.sdSorted, "SherpaOnnxOfflineSpeakerDiarizationResultSortByStartTime",
			&l.sdFreeSegments, "SherpaOnnxOfflineSpeakerDiarizationDestroySegment",
			&l.sdFreeResult, "SherpaOnnxOfflineSpeakerDiarizationDestroyResult",
			&l.createEx, "SherpaOnnxCreateSpeakerEmbeddingExtractor",
			&l.destroyEx, "SherpaOnnxDestroySpeakerEmbeddingExtractor",
			&l.exDim, "SherpaOnnxSpeakerEmbeddingExtractorDim",
			&l.exStream, "SherpaOnnxSpeakerEmbeddingExtractorCreateStream",
			&l.exReady, "SherpaOnnxSpeakerEmbeddingExtractorIsReady",
			&l.exCompute, "SherpaOnnxSpeakerEmbeddingExtractorComputeEmbedding",
			&l.exFree, "SherpaOnnxSpeakerEmbeddingExtractorDestroyEmbedding",
		); err != nil {
			libErr = fmt.Errorf("sherpa: %s: %w", p, err)
			return
		}
		l.progress = purego.NewCallback(progressCallback)
		theLib = l
	})
	return theLib, libErr
}

// cstrings owns the C strings of one config; free releases them all.
type cstrings []unsafe.Pointer

// of returns s as C memory owned by cs; "" gives NULL, which the library
// reads as unset (its defaults apply).
func (cs *cstrings) of(s string) cstr {
	if s == "" {
		return 0
	}
	p := native.CString(s)
	*cs = append(*cs, p)
	return uintptr(p)
}

func (cs *cstrings) free() {
	for _, p := range *cs {
		native.Free(p)
	}
	*cs = nil
}

// cAlloc returns a zeroed T in C memory, to be freed with native.Free.
func cAlloc[T any]() *T {
	var zero T
	return (*T)(native.Malloc(int(unsafe.Sizeof(zero))))
}

func freeMem(p unsafe.Pointer) { native.Free(p) }
