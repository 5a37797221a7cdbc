package onnx

import (
	"context"
	"errors"
	"io"
	"runtime"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// Live sessions (backends/live.go; CONTRACT.md live.turn-detection):
// Silero runs over the session's audio window by window as it arrives,
// its context and recurrent state carried across pieces (one stream for
// the session), and the online form of segments' hysteresis reports where
// speech starts and stops: started at the first window at or over the
// threshold (its time less speech_pad_ms), stopped once the probability
// has stayed under threshold-0.15 for min_silence_ms (the time it fell,
// plus speech_pad_ms). A Clear or Commit piece changes nothing here: the
// turns are the transcriber's. The windows run one native call each as
// they fill (silero.window), not through the shim's loop: a live session
// has at most a few windows of audio at a time, paced by real time.

// Live implements backends.LiveEngine.
func (e *Engine) Live() bool { return true }

func (s *session) live(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if emit == nil {
		return backends.Output{}, backends.Invalidf("onnx: a live session needs an emit callback")
	}
	var r audio.VADRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	p := s.cfg.vad
	if err := overlayVAD(&p, r.Threshold, r.MinSpeechMS, r.MinSilenceMS, r.SpeechPadMS); err != nil {
		return backends.Output{}, err
	}
	runtime.LockOSThread() // as probabilitiesPerWindow: many short native calls
	defer runtime.UnlockOSThread()
	v := s.vad
	defer v.terminateOn(ctx)()
	v.reset()
	var (
		rs       *audio.Resampler
		rsRate   int
		pcm      []int16
		win      []float32 // samples of the window being filled
		pos      int64     // 16 kHz samples run so far
		on       bool      // in speech
		tempEnd  int64     // where the probability fell under neg, 0: not fallen
		neg      = max(p.Threshold-0.15, 0.01)
		silence  = int64(sileroRate * p.MinSilenceMS / 1000)
		pad      = int64(sileroRate * p.SpeechPadMS / 1000)
		toMS     = func(n int64) int64 { return n * 1000 / sileroRate }
		emitKind = func(kind string, at int64) error {
			return backends.EmitLive(emit, backends.LiveEvent{Kind: kind, AudioMS: toMS(max(0, at))})
		}
	)
	for {
		piece, err := req.Live.Next(ctx)
		if errors.Is(err, io.EOF) {
			return backends.Output{}, nil
		}
		if err != nil {
			return backends.Output{}, err
		}
		if len(piece.Samples) == 0 {
			continue
		}
		if piece.Rate <= 0 {
			return backends.Output{}, backends.Invalidf("onnx: live audio without a sample rate")
		}
		if rs == nil || rsRate != piece.Rate {
			rs, rsRate = audio.NewResampler(piece.Rate, sileroRate), piece.Rate
		}
		pcm = rs.Write(piece.Samples, pcm[:0])
		for _, x := range pcm {
			win = append(win, float32(x)/32768)
			if len(win) < sileroWindow {
				continue
			}
			prob, err := v.window(ctx, win)
			if err != nil {
				return backends.Output{}, err
			}
			at := pos
			pos += int64(len(win))
			win = win[:0]
			pr := float64(prob)
			switch {
			case pr >= p.Threshold:
				tempEnd = 0
				if !on {
					on = true
					if err := emitKind(backends.LiveSpeechStarted, at-pad); err != nil {
						return backends.Output{}, err
					}
				}
			case pr < neg && on:
				if tempEnd == 0 {
					tempEnd = at
				}
				if at-tempEnd >= silence {
					on = false
					if err := emitKind(backends.LiveSpeechStopped, tempEnd+pad); err != nil {
						return backends.Output{}, err
					}
					tempEnd = 0
				}
			}
		}
	}
}
