package pocketsphinx

import "math"

// Endpointing: the decoder's text is final only once its utterance ended
// (ps_end_utt runs the second pass, which may revise every word of the
// first pass's hypothesis). So an upload or a live turn is decoded as a
// run of utterances cut at pauses, and each utterance's text goes out when
// it ends, never to be revised: the transcript is the utterances' texts
// joined by single spaces, whether the request streamed or not (the same
// cuts either way), and a stream's deltas concatenate to it exactly.
//
// The cuts are decided from the 16 kHz samples alone, before the decoder
// sees them, by an energy rule on 10 ms frames, so they depend neither on
// how the audio was split into pieces or appends nor on what the session
// decoded before (CONTRACT.md E1): a frame is quiet when the mean power of
// its last epSmooth frames is more than epRange dB under the loudest frame
// so far (decaying epDecay dB per frame) or under epFloor dBFS; an
// utterance with at least epMinSpeech loud frames is cut once epMinPause
// quiet frames in a row follow its last loud one, at the end of that
// frame. The decoder's own voice activity state (ps_get_in_speech) was
// not used: it is read only between ps_process_raw calls, so its cuts
// moved with the piece sizes, and it counts its hangover in frames the
// front end keeps back.

const (
	epFrame     = SampleRate / 100 // 10 ms
	epSmooth    = 3                // frames averaged
	epRange     = 25.0             // dB under the peak that is quiet
	epFloor     = -55.0            // dBFS under which a frame is quiet whatever the peak
	epDecay     = 0.02             // dB per frame the peak falls (2 dB/s)
	epMinSpeech = 10               // loud frames (100 ms) an utterance needs before a cut
	epMinPause  = 20               // quiet frames (200 ms) that end it
)

// endpointer finds the pauses that end utterances in a stream of samples.
// The zero value is a fresh one.
type endpointer struct {
	acc   float64           // sum of squares of the frame in progress
	n     int               // its samples
	hist  [epSmooth]float64 // the last frames' mean power
	nhist int               // frames seen (hist is full at epSmooth)
	peak  float64           // dBFS, decaying
	loud  int               // loud frames in the utterance
	quiet int               // quiet frames in a row since its last loud one
}

// next reads samples and returns how many of them belong to the utterance
// in progress, and whether a pause ended it there: then the caller ends
// the utterance after those samples and calls next again with the rest.
func (e *endpointer) next(samples []int16) (int, bool) {
	for i, x := range samples {
		e.acc += float64(x) * float64(x)
		e.n++
		if e.n == epFrame && e.frame() {
			return i + 1, true
		}
	}
	return len(samples), false
}

// frame ends a frame and reports whether it ended the utterance.
func (e *endpointer) frame() bool {
	p := e.acc / epFrame / (32768 * 32768)
	e.acc, e.n = 0, 0
	copy(e.hist[:], e.hist[1:])
	e.hist[epSmooth-1] = p
	e.nhist = min(e.nhist+1, epSmooth)
	sum := 0.0
	for _, h := range e.hist[epSmooth-e.nhist:] {
		sum += h
	}
	db := 10 * math.Log10(sum/float64(e.nhist)+1e-12)
	if e.nhist == 1 || db > e.peak {
		e.peak = db
	} else {
		e.peak -= epDecay
	}
	if db > epFloor && db > e.peak-epRange {
		e.loud++
		e.quiet = 0
		return false
	}
	e.quiet++
	if e.loud >= epMinSpeech && e.quiet >= epMinPause {
		e.loud, e.quiet = 0, 0
		return true
	}
	return false
}
