package pocketsphinx

import (
	"unsafe"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Ending an utterance whose result is not wanted (CONTRACT.md
// engine.cancel). ps_end_utt finishes the search, and the n-gram search's
// finish re-runs its second pass (fwdflat) over every frame the utterance
// decoded: 0.44 s after 80 pieces, 1.44 s after 160, growing with the
// decoded length, so a request cancelled a minute into its decode held
// its slot for seconds after the context ended. A cancelled, stopped or
// dropped utterance has no hypothesis anyone reads, so abortUtt turns the
// search's fwdflat flag off for its ps_end_utt and back on after:
// ngram_search_finish then only finishes the first pass (fwdtree), and the
// next ngram_search_start begins from the first pass as every utterance
// does. The flag lives in ngram_search_t, which sphinxbase does not
// export (the public API reads -fwdflat only when a search is built);
// flatFlag finds it at the offsets of pocketsphinx 5prealpha (Debian's
// libpocketsphinx3) and checks them against what the public API says
// (the active search's language model, the three pass flags of the
// default configuration). A layout it does not recognise gets nil, and
// abortUtt falls back to replacing the decoder (ps_free, then a fresh
// ps_init: 0.3-0.6 s for en-us, independent of the decoded length).

// Offsets into pocketsphinx 5prealpha's ps_decoder_t, ps_search_t and
// ngram_search_t (LP64).
const (
	psAcmod     = 16  // ps_decoder_t.acmod, then dict (24) and d2p (32)
	psSearch    = 56  // ps_decoder_t.search, the active search
	searchAcmod = 40  // ps_search_t.acmod, then dict (48) and d2p (56)
	ngsLmset    = 112 // ngram_search_t.lmset (after the 108-byte base, padded)
	ngsFwdtree  = 128 // uint8 fwdtree, then fwdflat (129), bestpath (130), done (131)
)

// flatFlag returns the address of the active n-gram search's fwdflat
// flag, or nil when the decoder's layout does not check out or the
// search does not run a second pass.
func (l *lib) flatFlag(ps unsafe.Pointer) *uint8 {
	search := *(*unsafe.Pointer)(unsafe.Add(ps, psSearch))
	if search == nil {
		return nil
	}
	for i := uintptr(0); i < 3; i++ {
		p := *(*unsafe.Pointer)(unsafe.Add(ps, psAcmod+8*i))
		if p == nil || p != *(*unsafe.Pointer)(unsafe.Add(search, searchAcmod+8*i)) {
			return nil
		}
	}
	name := l.getSearch(ps)
	if name == nil {
		return nil
	}
	lm := l.getLM(ps, name)
	if lm == nil || lm != *(*unsafe.Pointer)(unsafe.Add(search, ngsLmset)) {
		return nil
	}
	flags := unsafe.Slice((*uint8)(unsafe.Add(search, ngsFwdtree)), 4)
	if flags[0] != 1 || flags[1] != 1 || flags[3] > 1 {
		return nil // no fwdtree pass, no fwdflat pass, or not these fields
	}
	return &flags[1]
}

// findFlat is flatFlag (a variable so tests can take the fallback).
var findFlat = (*lib).flatFlag

// abortHook, when set (tests), is called after abortUtt ended an
// utterance, with whether the fwdflat pass was skipped (true) or the
// decoder replaced (false).
var abortHook func(skipped bool)

// abortUtt ends the current utterance without its second pass and leaves
// the session ready for the next request as a fresh decoder would be. It
// returns false when the session could not be made ready (the fallback's
// ps_init failed): the session is then closed. keepStream (a live
// session's cleared turn, whose stream goes on) ends the utterance with
// its full pass instead of replacing the decoder when the flag is not
// found.
func (s *session) abortUtt(keepStream bool) bool {
	l := s.lib
	if f := findFlat(l, s.ps); f != nil {
		*f = 0
		l.endUtt(s.ps)
		*f = 1
		if abortHook != nil {
			abortHook(true)
		}
		return true
	}
	if keepStream {
		l.endUtt(s.ps)
		return true
	}
	ok := s.replaceDecoder()
	if abortHook != nil {
		abortHook(false)
	}
	return ok
}

// replaceDecoder frees the decoder in the middle of its utterance and
// builds a fresh one from the same configuration, with its own CMN
// snapshot.
func (s *session) replaceDecoder() bool {
	l := s.lib
	l.freePS(s.ps)
	s.cmn.free()
	s.ps = l.newDecoder(s.cfg.argv())
	if s.ps == nil {
		native.Free(s.score)
		s.score = nil
		return false
	}
	s.cmn = l.snapshotCMN(s.ps)
	native.TrimHeap() // the freed decoder's pages (E5)
	return true
}
