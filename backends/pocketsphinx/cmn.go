package pocketsphinx

import (
	"fmt"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Cepstral mean normalisation across requests (CONTRACT.md E1). Decoding
// in pieces (ps_process_raw without full_utt, see decode) normalises with
// sphinxbase's live CMN, whose running mean carries from one utterance to
// the next even across ps_start_stream: the same audio then decodes
// differently after different predecessors. A session snapshots the mean
// its fresh decoder starts from (cmn_live_get) and restores it before
// every request (cmn_live_set), so each request starts where a fresh
// decoder would; adaptCMN then moves it to the request's own channel.
//
// The cmn_t is reached through the decoder's feat_t (ps_get_feat), whose
// layout sphinxbase does not export; cmnOf reads it at the offsets of
// sphinxbase 0.8+5prealpha (Debian's libsphinxbase3) and checks them
// against values it knows (the cepstrum length in both structures, a CMN
// type sphinxbase defines), so another layout finds no CMN and the
// session decodes each request whole instead (no pieces: cancellation
// and the cost budget are then checked only before and after the decode).

// Offsets into sphinxbase 5prealpha's feat_t and cmn_t (LP64).
const (
	featCepsize   = 16 // int32 cepsize
	featCMNType   = 68 // cmn_type_t cmn (0 none, 1 batch, 2 live)
	featCMNStruct = 88 // cmn_t *cmn_struct
	cmnVeclen     = 28 // int32 veclen
	cmnSum        = 16 // mfcc_t *sum
	cmnNframe     = 24 // int32 nframe
	cepLen        = 13 // the en-us model's cepstrum length (-ceplen default)
)

// cmnOf returns the decoder's cmn_t, or nil when the layout does not check
// out.
func (l *lib) cmnOf(ps unsafe.Pointer) unsafe.Pointer {
	f := l.getFeat(ps)
	if f == nil {
		return nil
	}
	if *(*int32)(unsafe.Add(f, featCepsize)) != cepLen {
		return nil
	}
	if t := *(*int32)(unsafe.Add(f, featCMNType)); t != 1 && t != 2 {
		return nil
	}
	c := *(*unsafe.Pointer)(unsafe.Add(f, featCMNStruct))
	if c == nil || *(*int32)(unsafe.Add(c, cmnVeclen)) != cepLen {
		return nil
	}
	return c
}

// cmnState is a session's CMN and the mean its fresh decoder started with.
type cmnState struct {
	cmn  unsafe.Pointer // cmn_t, nil when unknown (whole decodes)
	init unsafe.Pointer // cepLen float32, C memory
}

// snapshotCMN records the fresh decoder's mean.
func (l *lib) snapshotCMN(ps unsafe.Pointer) cmnState {
	c := l.cmnOf(ps)
	if c == nil {
		return cmnState{}
	}
	v := native.Malloc(4 * cepLen)
	l.cmnGet(c, v)
	return cmnState{cmn: c, init: v}
}

// reset restores the fresh decoder's mean.
func (l *lib) resetCMN(st cmnState) {
	if st.cmn != nil {
		l.cmnSet(st.cmn, st.init)
	}
}

func (st *cmnState) free() {
	native.Free(st.init)
	st.cmn, st.init = nil, nil
}

// adaptSamples is how much of a request's start (5 s at 16 kHz) the
// first pass decodes to adapt the live CMN to the request.
const adaptSamples = 5 * SampleRate

// adaptCMN starts the request from the fresh decoder's mean, then decodes
// up to its first adaptSamples once (in pieces, under the request's
// context and budget) and ends that utterance, which moves the live mean
// towards the request's own channel, as batch CMN over the whole request
// did when uploads were decoded whole; the real decode then starts from
// that mean. The mean depends on the request alone. run decodes samples
// in pieces (decode's loop).
func (s *session) adaptCMN(samples []int16, run func([]int16) error) error {
	l := s.lib
	l.resetCMN(s.cmn)
	if s.cmn.cmn == nil || len(samples) == 0 {
		return nil
	}
	// Weigh the fresh mean as one frame (cmn_live_set weighs it as
	// CMN_WIN, 500): the mean the first pass ends with is then nearly the
	// plain mean of its own frames, as batch CMN's is.
	*(*int32)(unsafe.Add(s.cmn.cmn, cmnNframe)) = 1
	sum := unsafe.Slice((*float32)(*(*unsafe.Pointer)(unsafe.Add(s.cmn.cmn, cmnSum))), cepLen)
	copy(sum, unsafe.Slice((*float32)(s.cmn.init), cepLen))
	if l.startUtt(s.ps) < 0 {
		return fmt.Errorf("pocketsphinx: start_utt failed")
	}
	if err := run(samples[:min(len(samples), adaptSamples)]); err != nil {
		return s.abort(err)
	}
	if l.endUtt(s.ps) < 0 {
		return fmt.Errorf("pocketsphinx: end_utt failed")
	}
	mean := native.Malloc(4 * cepLen)
	defer native.Free(mean)
	l.cmnGet(s.cmn.cmn, mean)
	l.cmnSet(s.cmn.cmn, mean) // the adapted mean, weighed as CMN_WIN frames
	if l.startStream(s.ps) < 0 {
		return fmt.Errorf("pocketsphinx: start_stream failed")
	}
	return nil
}
