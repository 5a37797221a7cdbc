package espeak

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// espeak-ng constants (espeak_ng.h, speak_lib.h).
const (
	ensOK           = 0
	outputSync      = 1 // ENOUTPUT_MODE_SYNCHRONOUS
	posCharacter    = 1 // POS_CHARACTER
	charsUTF8       = 1 // espeakCHARS_UTF8
	paramRate       = 1 // espeakRATE
	rateNormal      = 175
	rateMin         = 80
	rateMax         = 450
	randSeed        = 1
	callbackAbort   = 1
	callbackProceed = 0
)

// lib is libespeak-ng. Its state is process-global: data path, voice,
// parameters and the synth callback. Every call holds mu.
type lib struct {
	initializePath func(path unsafe.Pointer)
	initialize     func(ctx unsafe.Pointer) int32
	initOutput     func(mode int32, bufMS int32, device unsafe.Pointer) int32
	setCallback    func(cb uintptr)
	sampleRate     func() int32
	setVoice       func(name unsafe.Pointer) int32
	setParameter   func(param, value, relative int32) int32
	synthesize     func(text unsafe.Pointer, size uintptr, pos uint32, posType int32, end uint32, flags uint32, uid unsafe.Pointer, user unsafe.Pointer) int32
	statusMessage  func(status int32, buf unsafe.Pointer, n uintptr)
	clearContext   func(ctx unsafe.Pointer)

	randErr error // nil when espeak's rand import is rebound (see native/rand.go)

	mu       sync.Mutex
	dataPath string // "" until initialised
	rate     int    // output sample rate once initialised
	sessions int    // open sessions on the current data path

	// The synthesis in progress (under mu): the callback appends here.
	buf   []int16
	abort *atomic.Bool // the request's cancel flag, set by its context
}

var (
	libOnce   sync.Once
	theLib    *lib
	theLibErr error
)

func load() (*lib, error) {
	libOnce.Do(func() {
		h, err := native.Open("install the Debian packages libespeak-ng1 and espeak-ng-data", "libespeak-ng.so.1")
		if err != nil {
			theLibErr = err
			return
		}
		l := &lib{}
		if err := native.Bind(h,
			&l.initializePath, "espeak_ng_InitializePath",
			&l.initialize, "espeak_ng_Initialize",
			&l.initOutput, "espeak_ng_InitializeOutput",
			&l.setCallback, "espeak_SetSynthCallback",
			&l.sampleRate, "espeak_ng_GetSampleRate",
			&l.setVoice, "espeak_ng_SetVoiceByName",
			&l.setParameter, "espeak_ng_SetParameter",
			&l.synthesize, "espeak_ng_Synthesize",
			&l.statusMessage, "espeak_ng_GetStatusCodeMessage",
			&l.clearContext, "espeak_ng_ClearErrorContext",
		); err != nil {
			theLibErr = err
			return
		}
		l.randErr = native.PatchImport(h, "espeak_ng_Initialize", "rand", native.RandFunc())
		theLib = l
		// The callback is created once for the process (purego never frees
		// callbacks) and reaches the library through theLib.
		synthCB = purego.NewCallback(synthCallback)
	})
	return theLib, theLibErr
}

var synthCB uintptr

// synthCallback receives audio during espeak_ng_Synthesize (on the calling
// thread, with l.mu held by the caller).
func synthCallback(wav uintptr, n int32, events uintptr) int32 {
	l := theLib
	if wav != 0 && n > 0 {
		l.buf = append(l.buf, unsafe.Slice((*int16)(native.Ptr(wav)), int(n))...)
	}
	if l.abort != nil && l.abort.Load() {
		return callbackAbort
	}
	return callbackProceed
}

func (l *lib) message(status int32) string {
	buf := native.Malloc(512)
	defer native.Free(buf)
	l.statusMessage(status, buf, 512)
	return fmt.Sprintf("%s (status %#x)", native.GoString(buf), uint32(status))
}

// errOtherData refuses a second data path. espeak-ng cannot switch: its
// Terminate blocks in synchronous mode, and initialising again keeps the
// first path's voice list, so the first data path stays for the process.
func errOtherData(have, want string) error {
	return backends.Invalidf("espeak: eSpeak NG is process-global and was initialised with %s; it cannot also use %s until the process restarts", have, want)
}

// open initialises espeak-ng on dataPath (once per process) and counts a
// session. Call with mu.
func (l *lib) open(dataPath string) error {
	if l.dataPath == dataPath {
		l.sessions++
		return nil
	}
	if l.dataPath != "" {
		return errOtherData(l.dataPath, dataPath)
	}
	cpath := native.CString(dataPath)
	defer native.Free(cpath)
	l.initializePath(cpath)
	ctx := native.Malloc(8) // espeak_ng_ERROR_CONTEXT out-parameter
	defer native.Free(ctx)
	// espeak_ng_Initialize reports errors; the older espeak_Initialize would
	// print them and call exit(1) instead.
	if st := l.initialize(ctx); st != ensOK {
		l.clearContext(ctx)
		return backends.Invalidf("espeak-ng: initialise %s: %s", dataPath, l.message(st))
	}
	if st := l.initOutput(outputSync, 0, nil); st != ensOK {
		return backends.Invalidf("espeak-ng: initialise output with the data of %s: %s", dataPath, l.message(st)) // a damaged phondata (engine.load-safety)
	}
	l.setCallback(synthCB)
	l.dataPath, l.rate, l.sessions = dataPath, int(l.sampleRate()), 1
	return nil
}

// synth speaks text with voice at wpm words per minute. Call with mu.
func (l *lib) synth(voice string, wpm int, text string, abort *atomic.Bool) ([]int16, error) {
	// Set the voice on every synthesis: loading it resets the echo buffer
	// and other per-voice generator state left by the previous request.
	cv := native.CString(voice)
	st := l.setVoice(cv)
	native.Free(cv)
	if st != ensOK {
		return nil, fmt.Errorf("espeak-ng: voice %q: %s", voice, l.message(st))
	}
	if st := l.setParameter(paramRate, int32(wpm), 0); st != ensOK {
		return nil, fmt.Errorf("espeak-ng: rate %d: %s", wpm, l.message(st))
	}
	l.scrub()
	ct := native.CString(text)
	defer native.Free(ct)
	l.buf, l.abort = nil, abort
	run := func() { st = l.synthesize(ct, uintptr(len(text)+1), 0, posCharacter, 0, charsUTF8, nil, nil) }
	if l.randErr == nil {
		native.WithSeededRand(randSeed, run)
	} else if err := native.WithLibcRand(randSeed, run); err != nil {
		return nil, err
	}
	out := l.buf
	l.buf, l.abort = nil, nil
	if st != ensOK && !abort.Load() {
		return nil, fmt.Errorf("espeak-ng: synthesize: %s", l.message(st))
	}
	return out, nil
}

// scrubText is one clause of vowel phonemes in espeak's phoneme input
// ([[...]], espeakPHONEMES: no dictionary work): four words of 199 "a"
// (a word holds under 200 phonemes), about as long as a clause may be
// (espeak-ng reads at most 800 bytes of source per clause).
var scrubText = "[[" + strings.TrimSpace(strings.Repeat(strings.Repeat("a", 199)+" ", 4)) + "]]"

// phonemeInput is espeakPHONEMES (speak_lib.h): [[...]] is phonemes.
const phonemeInput = 0x100

// scrubbed is the abort flag of the scrub pass: always set, so the
// synthesis stops at its first audio callback, after translation.
var scrubbed = func() *atomic.Bool { var b atomic.Bool; b.Store(true); return &b }()

// scrub clears the history eSpeak NG keeps in its phoneme list (contract
// E1, history independence). MakePhonemeList ends every clause with two
// pause entries whose prepause field it never sets, so they keep the
// prepause a stop or fricative of an earlier, longer clause left in the
// same slot of the global phoneme_list, and Generate plays it as extra
// silence: "Sure, I will open it after the news." had a 150 ms comma
// pause alone and 189 ms right after "Good, we can leave in ten minutes
// then.". Translating a clause of vowels sets prepause to 0 in every slot
// it covers and CalcLengths sets none for vowels; the pass stops at the
// first audio callback, so it costs one translation and no audio (measured
// 0.3 ms, BenchmarkScrub, beside 3-5 ms for a short command). A clause
// translated to more phonemes than scrubText (only number-dense text near
// the 300-character sentence split can) may still leave a prepause in a
// slot past its reach.
// Call with mu.
func (l *lib) scrub() {
	ct := native.CString(scrubText)
	defer native.Free(ct)
	l.buf, l.abort = nil, scrubbed
	l.synthesize(ct, uintptr(len(scrubText)+1), 0, posCharacter, 0, charsUTF8|phonemeInput, nil, nil)
	l.buf, l.abort = nil, nil
}
