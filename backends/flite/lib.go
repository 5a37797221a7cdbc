package flite

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Offsets into flite's structs (flite 2.2, cst_voice.h and cst_wave.h, LP64).
const (
	offVoiceFeatures = 8  // cst_voice.features
	offWaveRate      = 8  // cst_wave.sample_rate
	offWaveSamples   = 12 // cst_wave.num_samples
	offWaveChannels  = 16 // cst_wave.num_channels
	offWaveData      = 24 // cst_wave.samples
)

// voiceLib describes one compiled-in voice: its library, its register
// function and the global where register caches the voice it built.
type voiceLib struct {
	lib, register, global string
}

// Voices are the compiled voices of Debian's libflite1.
var Voices = map[string]voiceLib{
	"slt":   {"libflite_cmu_us_slt.so.1", "register_cmu_us_slt", "cmu_us_slt_cg"},
	"awb":   {"libflite_cmu_us_awb.so.1", "register_cmu_us_awb", "cmu_us_awb_cg"},
	"rms":   {"libflite_cmu_us_rms.so.1", "register_cmu_us_rms", "cmu_us_rms_cg"},
	"kal":   {"libflite_cmu_us_kal.so.1", "register_cmu_us_kal", "cmu_us_kal_diphone"},
	"kal16": {"libflite_cmu_us_kal16.so.1", "register_cmu_us_kal16", "cmu_us_kal16_diphone"},
}

// lib is the loaded libflite with its functions.
type lib struct {
	textToWave func(text string, voice unsafe.Pointer) unsafe.Pointer
	deleteWave func(w unsafe.Pointer)
	newVoice   func() unsafe.Pointer
	delVoice   func(v unsafe.Pointer)
	setFloat   func(f unsafe.Pointer, name unsafe.Pointer, v float32)
	featSet    func(f unsafe.Pointer, name unsafe.Pointer, v unsafe.Pointer) // feat_set
	newASI     func() unsafe.Pointer                                         // new_audio_streaming_info
	asiVal     func(asi unsafe.Pointer) unsafe.Pointer                       // audio_streaming_info_val

	stretchName unsafe.Pointer // "duration_stretch" in C memory, never freed: feature names are kept by pointer
	streamName  unsafe.Pointer // "streaming_info", the same way

	// randErr is why libflite's rand import could not be rebound (nil when
	// it was). Without the rebinding, clustergen voices synthesise one at
	// a time after srand(1) (see synth) and admit one slot.
	randErr error

	regMu  sync.Mutex // serialises voice registration: it writes process globals
	voices map[string]*loadedVoice
}

type loadedVoice struct {
	register func(voxdir unsafe.Pointer) unsafe.Pointer
	global   uintptr // address of the voice library's cached-voice global
}

var (
	libOnce   sync.Once
	theLib    *lib
	theLibErr error
)

// load opens libflite once per process.
func load() (*lib, error) {
	libOnce.Do(func() {
		h, err := native.Open("install the Debian package libflite1", "libflite.so.1")
		if err != nil {
			theLibErr = err
			return
		}
		l := &lib{voices: map[string]*loadedVoice{}}
		var initFn func() int32
		if err := native.Bind(h,
			&initFn, "flite_init",
			&l.textToWave, "flite_text_to_wave",
			&l.deleteWave, "delete_wave",
			&l.newVoice, "new_voice",
			&l.delVoice, "delete_voice",
			&l.setFloat, "flite_feat_set_float",
			&l.featSet, "feat_set",
			&l.newASI, "new_audio_streaming_info",
			&l.asiVal, "audio_streaming_info_val",
		); err != nil {
			theLibErr = err
			return
		}
		initFn()
		l.stretchName = native.CString("duration_stretch")
		l.streamName = native.CString("streaming_info")
		// Clustergen's mixed excitation draws noise from rand(); give
		// each synthesis its own seeded sequence (see native/rand.go).
		l.randErr = native.PatchImport(h, "flite_init", "rand", native.RandFunc())
		theLib = l
	})
	return theLib, theLibErr
}

// voice loads (once) the library of voice name.
func (l *lib) voice(name string) (*loadedVoice, error) {
	l.regMu.Lock()
	defer l.regMu.Unlock()
	if v, ok := l.voices[name]; ok {
		return v, nil
	}
	vl, ok := Voices[name]
	if !ok {
		return nil, fmt.Errorf("flite: unknown voice %q", name)
	}
	h, err := native.Open("install the Debian package libflite1", vl.lib)
	if err != nil {
		return nil, err
	}
	reg, err := native.Sym(h, vl.register)
	if err != nil {
		return nil, err
	}
	glob, err := native.Sym(h, vl.global)
	if err != nil {
		return nil, err
	}
	v := &loadedVoice{global: glob}
	purego.RegisterFunc(&v.register, reg)
	l.voices[name] = v
	return v, nil
}

// newVoiceObject builds an independent cst_voice for name.
//
// register_cmu_us_X caches the voice it builds in a library global and
// returns that same object on every later call, so sessions would share one
// voice (whose feature values are reference counted without locks). Clearing
// the global around the call makes register build a fresh, private voice
// each time with the library's own code; the lexicon and the voice database
// it links are read-only and shared. Registration runs under regMu because
// it touches that global.
func (l *lib) newVoiceObject(name string) (unsafe.Pointer, error) {
	lv, err := l.voice(name)
	if err != nil {
		return nil, err
	}
	l.regMu.Lock()
	defer l.regMu.Unlock()
	slot := (*uintptr)(native.Ptr(lv.global))
	*slot = 0
	v := lv.register(nil)
	*slot = 0
	if v == nil {
		return nil, fmt.Errorf("flite: register voice %s returned NULL", name)
	}
	return v, nil
}

// randSeed seeds the noise of every synthesis, so equal requests give
// equal bytes on any session.
const randSeed = 1

// synth synthesises text with voice and returns its samples and rate.
func (l *lib) synth(voice unsafe.Pointer, text string) ([]int16, int, error) {
	var w unsafe.Pointer
	if l.randErr == nil {
		native.WithSeededRand(randSeed, func() { w = l.textToWave(text, voice) })
	} else if err := native.WithLibcRand(randSeed, func() { w = l.textToWave(text, voice) }); err != nil {
		return nil, 0, err
	}
	if w == nil {
		return nil, 0, fmt.Errorf("flite: synthesis returned no wave")
	}
	defer l.deleteWave(w)
	rate := int(native.Int32(w, offWaveRate))
	n := int(native.Int32(w, offWaveSamples))
	ch := int(native.Int32(w, offWaveChannels))
	if ch != 1 || n < 0 || rate <= 0 {
		return nil, 0, fmt.Errorf("flite: unexpected wave (%d channels, %d samples, %d Hz)", ch, n, rate)
	}
	out := make([]int16, n)
	if n > 0 {
		copy(out, unsafe.Slice((*int16)(native.Ptr(native.Uintptr(w, offWaveData))), n))
	}
	return out, rate, nil
}

// maxSlots lowers a voice's slot ceiling to one when its synthesis has to
// be serialised (rand could not be rebound and the voice uses clustergen).
func (l *lib) maxSlots(voice string, ceiling int) int {
	if l.randErr != nil && clustergen[voice] {
		return 1
	}
	return ceiling
}

// clustergen are the voices whose vocoder draws noise from rand().
var clustergen = map[string]bool{"slt": true, "awb": true, "rms": true}

// setStretch sets the voice's duration_stretch feature (1 = normal speed).
func (l *lib) setStretch(voice unsafe.Pointer, v float64) {
	feats := native.Ptr(native.Uintptr(voice, offVoiceFeatures))
	l.setFloat(feats, l.stretchName, float32(v))
}
