package onnx

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Silero VAD v5 at 16 kHz: each run sees 64 samples of context from the
// previous window followed by a 512-sample window, plus the recurrent state
// [2, 1, 128]; it returns the speech probability and the next state.
const (
	sileroRate    = 16000
	sileroWindow  = 512
	sileroContext = 64
	sileroState   = 2 * 1 * 128
)

var (
	sileroInputs  = []string{"input", "state", "sr"}
	sileroOutputs = []string{"output", "stateN"}
)

// silero is one OrtSession of the Silero model with its tensors bound to C
// buffers that live as long as the session, so a window costs one Run and
// no allocation. A request's windows run in the shim (shim/silero.c), in
// one native call; the live path runs them one call each as audio arrives.
type silero struct {
	o        *ort
	shim     *shim
	shimSt   *shimState // C memory: the shim's view of the buffers below
	sess     unsafe.Pointer
	ro       unsafe.Pointer // OrtRunOptions: terminated when a request's context ends
	in       unsafe.Pointer // float32[64+512]
	state    unsafe.Pointer // float32[256]
	sr       unsafe.Pointer // int64
	prob     unsafe.Pointer // float32[1]
	stateOut unsafe.Pointer // float32[256]
	shapes   unsafe.Pointer // int64 dims for the tensors
	values   unsafe.Pointer // OrtValue*[5]: 3 inputs then 2 outputs
	inNames  unsafe.Pointer // char*[3]
	outNames unsafe.Pointer // char*[2]

	// perWindow is a test hook: probabilities runs the per-window Go loop
	// (one native call per window, the live path's), the reference the
	// shim's output is compared with and measured against.
	perWindow bool
	// lockThread is a test hook: probabilities keeps the goroutine on one
	// OS thread for the shim's call (measured against not doing so).
	lockThread bool
}

// newSilero opens the model at path with opts (sharing the pre-packed
// weights of w when it is not nil) and checks it is Silero v5.
func newSilero(o *ort, path string, opts unsafe.Pointer, w *prepacked) (*silero, error) {
	sh, err := loadShim()
	if err != nil {
		return nil, err
	}
	out := native.Malloc(8)
	defer native.Free(out)
	cpath := native.CString(path)
	defer native.Free(cpath)
	var st status
	if w != nil {
		st = o.createSessionShared(o.env, cpath, opts, w.p, out)
	} else {
		st = o.createSession(o.env, cpath, opts, out)
	}
	if err := o.check(st, "load model "+path); err != nil {
		return nil, err
	}
	s := &silero{o: o, shim: sh, sess: native.Ptr(native.Uintptr(out, 0))}
	if err := s.checkSignature(); err != nil {
		s.close()
		return nil, err
	}
	if err := o.check(o.createRunOptions(out), "run options"); err != nil {
		s.close()
		return nil, err
	}
	s.ro = native.Ptr(native.Uintptr(out, 0))
	// A terminated run (a cancelled request) comes back as a status; the
	// run's logger would also print it on stderr as an error.
	if err := o.check(o.setRunLogSeverity(s.ro, logLevelFatal), "run log level"); err != nil {
		s.close()
		return nil, err
	}
	s.in = native.Malloc(4 * (sileroContext + sileroWindow))
	s.state = native.Malloc(4 * sileroState)
	s.sr = native.Malloc(8)
	*(*int64)(s.sr) = sileroRate
	s.prob = native.Malloc(4)
	s.stateOut = native.Malloc(4 * sileroState)
	s.shapes = native.Malloc(8 * 8)
	dims := unsafe.Slice((*int64)(s.shapes), 8)
	copy(dims, []int64{1, sileroContext + sileroWindow, 2, 1, 128, 1, 1, 0})
	s.values = native.Malloc(5 * 8)
	s.inNames = native.CStrings(sileroInputs)
	s.outNames = native.CStrings(sileroOutputs)
	vals := unsafe.Slice((*unsafe.Pointer)(s.values), 5)
	for i, t := range []struct {
		data  unsafe.Pointer
		bytes int
		dim0  int
		ndim  int
		typ   int32
	}{
		{s.in, 4 * (sileroContext + sileroWindow), 0, 2, tensorFloat},
		{s.state, 4 * sileroState, 2, 3, tensorFloat},
		{s.sr, 8, 7, 0, tensorInt64},
		{s.prob, 4, 5, 2, tensorFloat},
		{s.stateOut, 4 * sileroState, 2, 3, tensorFloat},
	} {
		shape := unsafe.Add(s.shapes, 8*t.dim0)
		if err := o.check(o.createTensor(o.cpuMem, t.data, uintptr(t.bytes), shape, uintptr(t.ndim), t.typ, out), "tensor"); err != nil {
			s.close()
			return nil, err
		}
		vals[i] = native.Ptr(native.Uintptr(out, 0))
	}
	s.shimSt = (*shimState)(native.Malloc(int(unsafe.Sizeof(shimState{}))))
	*s.shimSt = shimState{run: o.runFn, session: s.sess, runOptions: s.ro, inputNames: s.inNames, outputNames: s.outNames,
		values: s.values, in: s.in, state: s.state, prob: s.prob, stateOut: s.stateOut}
	return s, nil
}

// checkSignature compares the model's input and output names with Silero
// v5's, so another model is a clear error instead of a failed run.
func (s *silero) checkSignature() error {
	o := s.o
	out := native.Malloc(8)
	defer native.Free(out)
	names := func(count func(sess, out unsafe.Pointer) status, name func(unsafe.Pointer, uintptr, unsafe.Pointer, unsafe.Pointer) status) ([]string, error) {
		if err := o.check(count(s.sess, out), "count names"); err != nil {
			return nil, err
		}
		n := int(native.Uintptr(out, 0))
		list := make([]string, n)
		for i := range list {
			if err := o.check(name(s.sess, uintptr(i), o.alloc, out), "name"); err != nil {
				return nil, err
			}
			p := native.Ptr(native.Uintptr(out, 0))
			list[i] = native.GoString(p)
			_ = o.check(o.allocatorFree(o.alloc, p), "free name")
		}
		return list, nil
	}
	ins, err := names(o.inputCount, o.inputName)
	if err != nil {
		return err
	}
	outs, err := names(o.outputCount, o.outputName)
	if err != nil {
		return err
	}
	if strings.Join(ins, ",") != strings.Join(sileroInputs, ",") || strings.Join(outs, ",") != strings.Join(sileroOutputs, ",") {
		return fmt.Errorf("onnx: the model is not Silero VAD v5: inputs %v outputs %v, want %v and %v", ins, outs, sileroInputs, sileroOutputs)
	}
	return nil
}

// probabilities runs the model over samples (16 kHz), one probability per
// 512-sample window (the last window zero-padded). The state and context
// start at zero, so the result depends on this audio alone. A cancelled
// context terminates the run in progress through the run options.
//
// All the windows run in one native call (the shim's loop; a 10 s clip is
// 313 windows of about 100 us each). One call per window made the Go
// scheduler retake the P of the goroutine in each call when no P was idle
// (sysmon's retake, then handoffp starting a spinning M): with 2 slots on
// GOMAXPROCS=2 that cost kernel time and futex wake-ups per window, and
// 1->2 slot scaling stayed at 1.4-1.5x (docs/design.md, "Silero: one
// native call per request"). The per-window loop also held its OS thread
// for the request (it measured 1.07-1.17x without that); around one call
// holding it measured no different (BenchmarkSileroPaths, shim-locked),
// so this path does not.
func (s *silero) probabilities(ctx context.Context, samples []float32) ([]float32, error) {
	if s.perWindow {
		return s.probabilitiesPerWindow(ctx, samples)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := (len(samples) + sileroWindow - 1) / sileroWindow
	probs := make([]float32, n)
	if n == 0 {
		return probs, nil
	}
	if s.lockThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	defer s.terminateOn(ctx)()
	s.reset()
	// Go memory for the length of the call: samples and probs hold no Go
	// pointers, and the Go heap does not move.
	st := s.shim.run(unsafe.Pointer(s.shimSt), unsafe.Pointer(unsafe.SliceData(samples)), int64(len(samples)), unsafe.Pointer(unsafe.SliceData(probs)))
	runtime.KeepAlive(samples)
	runtime.KeepAlive(probs)
	if err := s.o.check(st, "run"); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return probs, nil
}

// probabilitiesPerWindow is probabilities with one native call per window
// (the live path's way), kept as the shim's reference. It holds the OS
// thread across the calls, as the live path does: many short native
// calls keep ONNX Runtime's and malloc's per-thread state warm and spare
// the scheduler a thread hand-off after calls whose P it retook.
func (s *silero) probabilitiesPerWindow(ctx context.Context, samples []float32) ([]float32, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer s.terminateOn(ctx)()
	s.reset()
	probs := make([]float32, 0, (len(samples)+sileroWindow-1)/sileroWindow)
	for off := 0; off < len(samples); off += sileroWindow {
		p, err := s.window(ctx, samples[off:min(len(samples), off+sileroWindow)])
		if err != nil {
			return nil, err
		}
		probs = append(probs, p)
	}
	return probs, nil
}

// terminateOn makes the end of ctx terminate the run in progress; the
// returned function undoes it (and clears a termination that fired).
func (s *silero) terminateOn(ctx context.Context) func() {
	o := s.o
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = o.check(o.setTerminate(s.ro), "terminate")
		close(fired)
	})
	return func() {
		if !stop() {
			<-fired
			_ = o.check(o.unsetTerminate(s.ro), "clear terminate")
		}
	}
}

// reset zeroes the context and the recurrent state: the next window
// starts a new stream.
func (s *silero) reset() {
	clear(unsafe.Slice((*float32)(s.in), sileroContext+sileroWindow))
	clear(unsafe.Slice((*float32)(s.state), sileroState))
}

// window runs one window of at most 512 samples (zero-padded) after the
// previous one's context and state, and returns its speech probability.
func (s *silero) window(ctx context.Context, samples []float32) (float32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	o := s.o
	in := unsafe.Slice((*float32)(s.in), sileroContext+sileroWindow)
	copy(in[:sileroContext], in[sileroWindow:]) // last 64 samples become the context
	n := copy(in[sileroContext:], samples)
	clear(in[sileroContext+n:])
	vals := unsafe.Slice((*unsafe.Pointer)(s.values), 5)
	if err := o.check(o.run(s.sess, s.ro, s.inNames, s.values, 3, s.outNames, 2, unsafe.Pointer(&vals[3])), "run"); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, err
	}
	copy(unsafe.Slice((*float32)(s.state), sileroState), unsafe.Slice((*float32)(s.stateOut), sileroState))
	return *(*float32)(s.prob), nil
}

func (s *silero) close() {
	o := s.o
	if s.values != nil {
		for _, v := range unsafe.Slice((*unsafe.Pointer)(s.values), 5) {
			if v != nil {
				o.releaseValue(v)
			}
		}
	}
	if s.ro != nil {
		o.releaseRunOptions(s.ro)
	}
	if s.sess != nil {
		o.releaseSession(s.sess)
	}
	for _, p := range []unsafe.Pointer{s.in, s.state, s.sr, s.prob, s.stateOut, s.shapes, s.values, unsafe.Pointer(s.shimSt)} {
		native.Free(p)
	}
	native.FreeCStrings(s.inNames, len(sileroInputs))
	native.FreeCStrings(s.outNames, len(sileroOutputs))
	*s = silero{}
}

// vadParams are the segmentation settings (silero-vad's
// get_speech_timestamps defaults).
type vadParams struct {
	Threshold    float64
	MinSpeechMS  int
	MinSilenceMS int
	SpeechPadMS  int
}

// segments turns window probabilities into speech segments (in samples),
// following silero-vad's get_speech_timestamps: hysteresis between
// threshold and threshold-0.15, speech shorter than min_speech dropped,
// pauses shorter than min_silence bridged, and speech_pad added each side
// (halving the gap when neighbours are closer than two pads).
func segments(probs []float32, total int, p vadParams) [][2]int {
	sr := sileroRate
	minSpeech := sr * p.MinSpeechMS / 1000
	minSilence := sr * p.MinSilenceMS / 1000
	pad := sr * p.SpeechPadMS / 1000
	neg := max(p.Threshold-0.15, 0.01)
	var out [][2]int
	triggered := false
	start, tempEnd := 0, 0
	for i, pr := range probs {
		pos := i * sileroWindow
		prob := float64(pr)
		if prob >= p.Threshold && tempEnd != 0 {
			tempEnd = 0
		}
		if prob >= p.Threshold && !triggered {
			triggered, start = true, pos
			continue
		}
		if prob < neg && triggered {
			if tempEnd == 0 {
				tempEnd = pos
			}
			if pos-tempEnd < minSilence {
				continue
			}
			if tempEnd-start > minSpeech {
				out = append(out, [2]int{start, tempEnd})
			}
			triggered, tempEnd = false, 0
		}
	}
	if triggered && total-start > minSpeech {
		out = append(out, [2]int{start, total})
	}
	for i := range out {
		if i == 0 {
			out[i][0] = max(0, out[i][0]-pad)
		}
		if i < len(out)-1 {
			gap := out[i+1][0] - out[i][1]
			if gap < 2*pad {
				out[i][1] += gap / 2
				out[i+1][0] = max(0, out[i+1][0]-gap/2)
			} else {
				out[i][1] = min(total, out[i][1]+pad)
				out[i+1][0] = max(0, out[i+1][0]-pad)
			}
		} else {
			out[i][1] = min(total, out[i][1]+pad)
		}
	}
	return out
}

// toSeconds converts sample segments to the response's seconds (rounded
// to the millisecond).
func toSeconds(segs [][2]int) []audio.Segment {
	out := make([]audio.Segment, len(segs))
	for i, s := range segs {
		out[i] = audio.Segment{Start: ms(s[0]), End: ms(s[1])}
	}
	return out
}

func ms(samples int) float64 {
	return float64((samples*1000+sileroRate/2)/sileroRate) / 1000
}
