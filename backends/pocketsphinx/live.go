package pocketsphinx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Live sessions (backends/live.go; CONTRACT.md "Live sessions",
// live.transcribe): the decoder takes a turn's audio as it arrives
// (ps_start_utt, then ps_process_raw per piece without full_utt, so CMN
// and the search run incrementally), and the turn is cut into utterances
// at its pauses (endpoint.go, the rule uploads use): an utterance ends
// (ps_end_utt) at each pause and its text is then final. A partial
// carries the turn's ended utterances only, never the hypothesis in
// progress, which the second pass may still revise; the final is those
// and the last utterance, ended at the commit. So every delta the server
// derives from the partials is words the completed transcript starts
// with, and the turn's deltas concatenate to it exactly. A session is one
// stream (ps_start_stream): the front end's running statistics carry from
// turn to turn, as they would for one speaker on one microphone.

// Live implements backends.LiveEngine.
func (e *Engine) Live() bool { return true }

// liveBuf is the C buffer live pieces are copied into.
type liveBuf struct {
	p   unsafe.Pointer
	cap int // samples
}

func (b *liveBuf) put(samples []int16) unsafe.Pointer {
	if len(samples) > b.cap {
		native.Free(b.p)
		b.cap = max(len(samples), 2*b.cap, SampleRate/5)
		b.p = native.Malloc(2 * b.cap)
	}
	copy(unsafe.Slice((*int16)(b.p), len(samples)), samples)
	return b.p
}

// live runs a live session on the decoder until req.Live ends.
func (s *session) live(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if emit == nil {
		return backends.Output{}, backends.Invalidf("pocketsphinx: a live session needs an emit callback")
	}
	var r audio.AudioRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	if err := r.CheckPlain("pocketsphinx"); err != nil {
		return backends.Output{}, err
	}
	if _, err := audio.CheckLanguage(r.Language, []string{s.cfg.language}); err != nil {
		return backends.Output{}, fmt.Errorf("pocketsphinx: %w", err)
	}
	l := s.lib
	if l.startStream(s.ps) < 0 {
		return backends.Output{}, fmt.Errorf("pocketsphinx: start_stream failed")
	}
	// A live session starts from the fresh decoder's CMN, whatever the
	// session's earlier requests left (cmn.go; E1).
	l.resetCMN(s.cmn)
	var buf liveBuf
	defer func() { native.Free(buf.p) }()
	var (
		rs      *audio.Resampler // the turn's, from its rate to 16 kHz
		rsRate  int
		pcm     []int16
		open    bool // an utterance is started
		turn    int
		ep      endpointer // the turn's
		settled []string   // the turn's ended utterances' texts
	)
	defer func() {
		if open {
			s.abortUtt(false) // a dropped turn: its result is not wanted (abort.go)
		}
	}()
	// endUtt ends the utterance in progress and keeps its text.
	endUtt := func() error {
		if !open {
			return nil
		}
		open = false
		if l.endUtt(s.ps) < 0 {
			return fmt.Errorf("pocketsphinx: end_utt failed")
		}
		if text := strings.TrimSpace(native.GoString(l.getHyp(s.ps, s.score))); text != "" {
			settled = append(settled, text)
		}
		return nil
	}
	// feed decodes samples, ending an utterance at each pause in them.
	// When one ended with text, the turn's settled text goes out as a
	// partial twice: the server lets out the words two hypotheses in a
	// row share, less the last (live.transcribe), so the repeat lets all
	// of it out but its last word, which the next partial or the final
	// says.
	feed := func(samples []int16) error {
		for len(samples) > 0 {
			k, cut := ep.next(samples)
			if !open {
				if l.startUtt(s.ps) < 0 {
					return fmt.Errorf("pocketsphinx: start_utt failed")
				}
				open = true
			}
			if l.processRaw(s.ps, buf.put(samples[:k]), uintptr(k), 0, 0) < 0 {
				return fmt.Errorf("pocketsphinx: process_raw failed")
			}
			samples = samples[k:]
			if !cut {
				continue
			}
			n := len(settled)
			if err := endUtt(); err != nil {
				return err
			}
			if len(settled) == n {
				continue
			}
			ev := backends.LiveEvent{Kind: backends.LivePartial, Turn: turn, Text: strings.Join(settled, " ")}
			for range 2 {
				if err := backends.EmitLive(emit, ev); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for {
		p, err := req.Live.Next(ctx)
		if errors.Is(err, io.EOF) {
			return backends.Output{}, nil
		}
		if err != nil {
			return backends.Output{}, err
		}
		if p.Clear {
			if open {
				s.abortUtt(true) // a cleared turn: its result is not wanted
				open = false
			}
			rs, ep, settled = nil, endpointer{}, nil
		}
		if len(p.Samples) > 0 {
			if p.Rate <= 0 {
				return backends.Output{}, backends.Invalidf("pocketsphinx: live audio without a sample rate")
			}
			if rs == nil || rsRate != p.Rate {
				if rs != nil {
					if err := feed(rs.Flush(pcm[:0])); err != nil {
						return backends.Output{}, err
					}
				}
				rs, rsRate = audio.NewResampler(p.Rate, SampleRate), p.Rate
			}
			pcm = rs.Write(p.Samples, pcm[:0])
			if err := feed(pcm); err != nil {
				return backends.Output{}, err
			}
		}
		if p.Commit {
			if rs != nil {
				if err := feed(rs.Flush(pcm[:0])); err != nil {
					return backends.Output{}, err
				}
				rs = nil
			}
			if err := endUtt(); err != nil {
				return backends.Output{}, err
			}
			if err := backends.EmitLive(emit, backends.LiveEvent{Kind: backends.LiveFinal, Turn: turn, Text: strings.Join(settled, " ")}); err != nil {
				return backends.Output{}, err
			}
			turn++
			ep, settled = endpointer{}, nil
		}
	}
}
