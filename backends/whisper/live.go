package whisper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// Live sessions (backends/live.go; CONTRACT.md "Live sessions",
// live.transcribe): whisper decodes whole windows, not audio as it arrives,
// so a turn is re-decoded as it grows, on the session's own slot (one
// decode at a time, in the loop that reads the audio). The turn's audio
// is cut at every step of it (option live_step_ms, default LiveStep) (counted in samples, never in wall time,
// so the decodes, the partials and the final depend on the turn's audio
// alone, not on how it was split into appends or on the machine's speed).
// Each decode covers the audio after the turn's frozen part: its
// segments that end liveMargin or more before the decoded audio's end,
// all but the last, are frozen (their text is final, the frozen part
// moves to their end, later decodes never see that audio again). A
// partial carries the frozen text only, so every delta the server derives
// from the partials is text the completed transcript starts with; the
// final is the frozen text and a last decode of the rest.
//
// Cost: one decode per step of audio, each of at most the window plus a
// step of audio (one whisper window): when the unfrozen audio reaches the
// window, every segment but the last is frozen whatever its end, or the
// whole window when nothing settled. So a turn costs at most (its seconds
// / step) decodes of one window, bounded by its duration; an engine
// slower than that falls behind its client, and the server's bounded live
// queue slows the client (live.backpressure).

// Live implements backends.LiveEngine.
func (e *Engine) Live() bool { return true }

// LiveStep is the default turn audio between two partial decodes
// (option live_step_ms; samples at SampleRate): 1 s.
const LiveStep = SampleRate

// liveMargin: a segment ending this close to the end of the decoded audio
// may still change when more audio comes (a word cut at the end), so it
// is not frozen.
const liveMargin = 2 * SampleRate

// LiveWindow is the default bound on the unfrozen audio a decode sees
// (option live_window_ms): whisper's 30 s window less a step.
const LiveWindow = 30*SampleRate - LiveStep

// liveTurn is the turn in progress: its audio at SampleRate, the part
// frozen, the frozen segments' text and how far it was decoded.
type liveTurn struct {
	pcm     []int16
	frozen  int
	text    []string
	decoded int
	window  int // the checkpoint's live window (samples)
}

// settle freezes what the decode of pcm[frozen:decoded] made final.
func (t *liveTurn) settle(segs []audio.ASRSegment) {
	span := t.decoded - t.frozen
	force := span >= t.window
	grew := false
	for i, g := range segs {
		end := min(span, int(g.End*SampleRate+0.5))
		// the last segment may grow; one that ends too near the end may
		// change; one without a positive end cannot move the frozen part
		if i == len(segs)-1 || end <= 0 || (end > span-liveMargin && !force) {
			break
		}
		t.text = append(t.text, g.Text)
		t.frozen += end
		span -= end
		grew = true
		// the following segments' times are relative to the old start
		for j := i + 1; j < len(segs); j++ {
			segs[j].End -= float64(end) / SampleRate
		}
	}
	if force && !grew {
		// nothing settled in a whole window (one segment, none, or
		// none with a usable end): the window is frozen as it stands,
		// its text with it, or its silence dropped up to the margin.
		if len(segs) > 0 {
			for _, g := range segs {
				t.text = append(t.text, g.Text)
			}
			t.frozen += span
		} else {
			t.frozen += span - liveMargin
		}
	}
}

// live runs a live session on the slot until req.Live ends.
func (s *session) live(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if emit == nil {
		return backends.Output{}, backends.Invalidf("whisper: a live session needs an emit callback")
	}
	var r audio.AudioRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	if r.VADFilter != nil && *r.VADFilter {
		return backends.Output{}, backends.Invalidf("whisper: vad_filter is for whole files; a live session's turns are cut by the client or the server's turn detection")
	}
	d, err := s.check(r)
	if err != nil {
		return backends.Output{}, err
	}
	newTurn := liveTurn{window: s.cfg.liveWindow}
	var (
		t      = newTurn
		turn   int
		rs     *audio.Resampler // the turn's, from its rate to 16 kHz
		rsRate int
		pcm    []int16
	)
	decode := func(samples []int16) ([]audio.ASRSegment, error) {
		res, err := s.transcribe(ctx, samples, d, round3(float64(len(samples))/SampleRate), nil)
		return res.Segments, err
	}
	// partials decodes the turn at every step boundary its audio passed.
	partials := func() error {
		for t.decoded+s.cfg.liveStep <= len(t.pcm) {
			t.decoded += s.cfg.liveStep
			segs, err := decode(t.pcm[t.frozen:t.decoded])
			if err != nil {
				return err
			}
			// The frozen text after every decode, grown or not: the
			// server sends the words two hypotheses in a row share, less
			// the last (live.transcribe), so a repeated one lets all but
			// its last word out.
			if t.settle(segs); len(t.text) > 0 {
				if err := backends.EmitLive(emit, backends.LiveEvent{Kind: backends.LivePartial, Turn: turn, Text: strings.Join(t.text, " ")}); err != nil {
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
			t, rs = newTurn, nil
		}
		if len(p.Samples) > 0 {
			if p.Rate <= 0 {
				return backends.Output{}, backends.Invalidf("whisper: live audio without a sample rate")
			}
			if rs == nil || rsRate != p.Rate {
				if rs != nil {
					t.pcm = rs.Flush(t.pcm)
				}
				rs, rsRate = audio.NewResampler(p.Rate, SampleRate), p.Rate
			}
			pcm = rs.Write(p.Samples, pcm[:0])
			t.pcm = append(t.pcm, pcm...)
			if err := partials(); err != nil {
				return backends.Output{}, fmt.Errorf("whisper: live partial: %w", err)
			}
		}
		if p.Commit {
			if rs != nil {
				t.pcm = rs.Flush(t.pcm)
				rs = nil
			}
			text := t.text
			if rest := t.pcm[t.frozen:]; len(rest) > 0 {
				segs, err := decode(rest)
				if err != nil {
					return backends.Output{}, fmt.Errorf("whisper: live final: %w", err)
				}
				for _, g := range segs {
					text = append(text, g.Text)
				}
			}
			if err := backends.EmitLive(emit, backends.LiveEvent{Kind: backends.LiveFinal, Turn: turn, Text: strings.Join(text, " ")}); err != nil {
				return backends.Output{}, err
			}
			turn++
			t = newTurn
		}
	}
}
