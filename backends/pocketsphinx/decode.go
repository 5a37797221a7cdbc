package pocketsphinx

import (
	"context"
	"fmt"
	"strings"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// utterance is one decoded stretch of a request between two pauses
// (endpoint.go): its text and words, final once it is reported.
type utterance struct {
	text  string
	words []audio.Word
}

// decode decodes a request in a fresh stream: the result depends on this
// audio alone, not on earlier requests. Every request goes to the decoder
// in pieces of at most pieceSamples, after adaptCMN's first pass over its
// first adaptSamples; between pieces the context and the cost budget are
// checked (E2, E3), and either ends the utterance in progress and returns
// its error, leaving the session ready for the next request. (Short
// requests were once one whole full_utt decode; that decode's word times
// then depended on what a pieced request had left in the decoder:
// TestAnswersIndependentOfPathBefore.) The audio is cut into utterances at
// pauses (endpoint.go); each one, once ended, goes to sink (nil: none)
// before the next is decoded. decode returns the utterances' texts joined
// by single spaces and their words with their times (from the decoder's
// word segmentation, fillers and silences left out), clamped to the
// audio's seconds.
func (s *session) decode(ctx context.Context, samples []int16, seconds float64, sink func(utterance) error) (string, []audio.Word, error) {
	n := min(len(samples), pieceSamples)
	whole := int32(0)
	if s.cmn.cmn == nil {
		// An unknown CMN layout: one whole decode with batch CMN, one
		// utterance.
		n, whole = len(samples), 1
	}
	buf := native.Malloc(2 * max(1, n))
	defer native.Free(buf)
	l := s.lib
	m := startMeter(s.cfg.budget(seconds))
	defer m.stop()
	pieces := 0
	feed := func(piece []int16) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		copy(unsafe.Slice((*int16)(buf), len(piece)), piece)
		if l.processRaw(s.ps, buf, uintptr(len(piece)), 0, whole) < 0 {
			return fmt.Errorf("pocketsphinx: process_raw failed")
		}
		pieces++
		if afterPiece != nil {
			afterPiece(pieces)
		}
		return m.check(seconds)
	}
	run := func(samples []int16) error {
		for off := 0; off < len(samples); off += n {
			if err := feed(samples[off:min(off+n, len(samples))]); err != nil {
				return err
			}
		}
		return nil
	}
	// Every request is its own stream: the front end's noise and voice
	// activity statistics are kept per stream, and would otherwise carry
	// one request's channel estimate into the next (the same audio then
	// decodes differently after different predecessors).
	if l.startStream(s.ps) < 0 {
		return "", nil, fmt.Errorf("pocketsphinx: start_stream failed")
	}
	if whole == 0 {
		if err := s.adaptCMN(samples, run); err != nil {
			return "", nil, err
		}
	}
	var (
		texts []string
		words []audio.Word
		ep    endpointer
	)
	// end ends the utterance in progress.
	end := func() error {
		if l.endUtt(s.ps) < 0 {
			return fmt.Errorf("pocketsphinx: end_utt failed")
		}
		u := utterance{text: strings.TrimSpace(native.GoString(l.getHyp(s.ps, s.score))), words: s.words(seconds)}
		if u.text == "" {
			return nil
		}
		texts, words = append(texts, u.text), append(words, u.words...)
		if sink != nil {
			return sink(u)
		}
		return nil
	}
	if l.startUtt(s.ps) < 0 {
		return "", nil, fmt.Errorf("pocketsphinx: start_utt failed")
	}
	for off := 0; off < len(samples); {
		piece := samples[off:min(off+n, len(samples))]
		k, cut := len(piece), false
		if whole == 0 {
			k, cut = ep.next(piece)
		}
		if err := feed(piece[:k]); err != nil {
			return "", nil, s.abort(err)
		}
		off += k
		if cut {
			if err := end(); err != nil {
				return "", nil, err
			}
			if l.startUtt(s.ps) < 0 {
				return "", nil, fmt.Errorf("pocketsphinx: start_utt failed")
			}
		}
	}
	if err := end(); err != nil {
		return "", nil, err
	}
	return strings.Join(texts, " "), words, nil
}
