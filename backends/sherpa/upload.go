package sherpa

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// An upload (an ordinary ASR request) on a streaming recognizer is one
// library stream fed in 100 ms pieces as a live session would, with the
// recognizer's endpoint detection (sherpa-onnx's three rules: trailing
// silence after nothing, trailing silence after speech, utterance
// length; the library's defaults) checked after every decoded chunk.
// When an endpoint fires, the segment's text is final: the stream is
// reset (its text starts over, its audio goes on) and, with
// Request.Stream, the segment goes out at once as an
// audio.TranscriptDelta. The transcript is the segments' texts joined by
// one space whether streamed or not (the same pieces, the same chunks,
// the same endpoints), so the deltas concatenate to it byte for byte and
// a delta is never taken back. Each request has its own stream: the
// answer depends on its audio alone. ctx is checked before every chunk
// (sherpa.cancel).

// uploadPiece is the piece an upload is fed in (samples at 16 kHz).
const uploadPiece = SampleRate / 10

// transcribeStreaming answers a file on a streaming model; with
// req.Stream and emit, each endpointed segment is emitted as it ends and
// the final audio.ASRResult has Streamed set.
func (m *model) transcribeStreaming(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	f, err := m.asrFields(req, true)
	if err != nil {
		return backends.Output{}, err
	}
	lang, hw := f.lang, f.hotwords
	a, err := m.decodeUpload(ctx, req, f)
	if err != nil {
		return backends.Output{}, err
	}
	dur := math.Round(a.Seconds()*1000) / 1000
	stream := req.Stream && emit != nil
	u := &uploadState{turnState: turnState{m: m, hw: hw}, total: len(a.Samples)}
	defer u.drop()
	if stream {
		u.sink = func(d audio.TranscriptDelta) error {
			b, err := json.Marshal(d)
			if err != nil {
				return err
			}
			return emit(b)
		}
	}
	for i := 0; i < len(a.Samples); i += uploadPiece {
		if err := u.feed(ctx, a.Samples[i:min(len(a.Samples), i+uploadPiece)]); err != nil {
			return backends.Output{}, err
		}
	}
	if err := u.finish(ctx); err != nil {
		return backends.Output{}, err
	}
	b, err := json.Marshal(audio.ASRResult{Text: u.out.String(), Duration: dur, Language: lang, Streamed: stream})
	if err != nil {
		return backends.Output{}, err
	}
	if stream {
		if err := emit(b); err != nil {
			return backends.Output{}, err
		}
	}
	return backends.Output{JSON: b}, nil
}

// uploadState is an upload's stream with its endpointed segments.
type uploadState struct {
	turnState
	out     strings.Builder // the segments so far, joined by a space
	fed     int             // samples accepted (the stream's clock)
	total   int             // the upload's samples (a segment ends within them)
	segFrom int             // where the current segment began (samples)
	sink    func(audio.TranscriptDelta) error
}

// feed accepts pcm (16 kHz) and decodes every chunk that is ready,
// ending a segment wherever the endpoint fires.
func (u *uploadState) feed(ctx context.Context, pcm []int16) error {
	if u.stream == 0 {
		if u.stream = u.m.onlineStream(u.hw); u.stream == 0 {
			return fmt.Errorf("sherpa: could not create a stream")
		}
	}
	if len(pcm) > 0 {
		p := floatSamples(pcm)
		u.m.lib.acceptOn(u.stream, SampleRate, p, int32(len(pcm)))
		native.Free(p)
		u.fed += len(pcm)
	}
	for u.m.lib.onReady(u.m.ptr, u.stream) != 0 {
		hook("online-decode")
		if err := ctx.Err(); err != nil {
			return err // between chunks (sherpa.cancel)
		}
		u.m.lib.decodeOn(u.m.ptr, u.stream)
		hook("online-decoded")
		if u.m.lib.onEndpoint(u.m.ptr, u.stream) != 0 {
			if err := u.segment(u.text(), u.fed); err != nil {
				return err
			}
			u.m.lib.onReset(u.m.ptr, u.stream)
		}
	}
	return nil
}

// finish flushes the stream (tail padding, input finished) and ends the
// last segment.
func (u *uploadState) finish(ctx context.Context) error {
	if err := u.feed(ctx, make([]int16, u.m.cfg.tailPadding())); err != nil {
		return err
	}
	u.m.lib.onFinished(u.stream)
	if err := u.feed(ctx, nil); err != nil {
		return err
	}
	return u.segment(u.text(), u.fed)
}

// segment ends the current segment at sample end with text: appended to
// the transcript (after a space) and, when streaming, emitted as the
// delta that appends it. An empty segment adds nothing.
func (u *uploadState) segment(text string, end int) error {
	end = min(end, u.total)
	from := u.segFrom
	u.segFrom = end
	if text == "" {
		return nil
	}
	d := audio.TranscriptDelta{Delta: text, Start: secs(from), End: secs(end)}
	if u.out.Len() > 0 {
		d.Delta = " " + text
	}
	u.out.WriteString(d.Delta)
	hook("online-segment")
	if u.sink == nil {
		return nil
	}
	return u.sink(d)
}

// secs is a sample count at 16 kHz in seconds, to the millisecond.
func secs(n int) float64 { return math.Round(float64(n)*1000/SampleRate) / 1000 }
