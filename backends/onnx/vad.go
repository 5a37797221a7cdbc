package onnx

import (
	"context"

	"github.com/sluice-dev/sluice/backends/audio"
)

// VADRate is the sample rate Silero VAD v5 takes.
const VADRate = sileroRate

// VADParams are the segmentation settings of VAD.Speech (silero-vad's
// get_speech_timestamps): threshold in (0, 1), durations in milliseconds.
type VADParams struct {
	Threshold    float64
	MinSpeechMS  int
	MinSilenceMS int
	SpeechPadMS  int
}

// Check reports settings out of range (an error wrapping
// backends.ErrInvalid).
func (p VADParams) Check() error {
	v := vadParams(p)
	return overlayVAD(&v, 0, 0, 0, 0)
}

// VAD is one Silero VAD v5 session for another engine's pipeline (the
// diarization engine's speech regions). It is used by one goroutine at a
// time, like a session.
type VAD struct{ s *silero }

// OpenVAD opens the Silero model at path on the CPU with threads intra-op
// threads, through the ONNX Runtime library lib ("" = DefaultLibrary()).
func OpenVAD(ctx context.Context, lib, path string, threads int) (*VAD, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lib == "" {
		lib = DefaultLibrary()
	}
	if err := checkModelFile(path); err != nil {
		return nil, err
	}
	o, err := loadOrt(lib)
	if err != nil {
		return nil, err
	}
	opts, err := o.sessionOptions(tuning{provider: "cpu", threads: max(1, threads)})
	if err != nil {
		return nil, err
	}
	defer o.releaseSessionOpts(opts)
	s, err := newSilero(o, path, opts, nil)
	if err != nil {
		return nil, err
	}
	return &VAD{s: s}, nil
}

// Speech returns the speech regions of samples (mono at VADRate) as
// [start, end) sample offsets. The recurrent state starts at zero, so the
// result depends on these samples alone; a cancelled ctx stops it.
func (v *VAD) Speech(ctx context.Context, samples []int16, p VADParams) ([][2]int, error) {
	probs, err := v.s.probabilities(ctx, audio.Float32(samples))
	if err != nil {
		return nil, err
	}
	return segments(probs, len(samples), vadParams(p)), nil
}

// Close frees the session.
func (v *VAD) Close() {
	if v.s != nil {
		v.s.close()
		v.s = nil
	}
}
