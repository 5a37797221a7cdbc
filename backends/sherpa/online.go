package sherpa

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Live sessions (backends/live.go; CONTRACT.md "Live sessions") on a
// streaming recognizer. Each turn is one library stream, created at the
// turn's first audio: the audio is resampled to 16 kHz and accepted as it
// arrives, every chunk the model can take is decoded at once (the model
// works in chunks of decode_chunk_len feature frames, 320 ms for
// icefall's exports), and the hypothesis is emitted as a partial whenever
// it changed. A transducer's greedy search only appends tokens, so a
// hypothesis extends the previous one (its last word may still grow):
// the server's stable-word deltas (all words but the last) are a prefix
// of the turn's final. At a commit the turn gets tailPadding of silence
// (to flush the encoder's last chunk), InputFinished, its remaining
// chunks decoded, and its final emitted; the stream is destroyed, so a
// turn's transcript depends on its own audio alone. A clear drops the
// turn's stream. Cancellation: ctx is checked between pieces and between
// chunks; one chunk's decode is not interruptible.

// tailPadding is the silence added to a turn at its commit (samples).
const tailPadding = SampleRate * 3 / 5

// Live implements backends.LiveEngine (streaming families only; the
// server asks the engine, and the other families refuse live requests).
func (e *Engine) Live() bool { return true }

// live runs a live session until req.Live ends.
func (m *model) live(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if emit == nil {
		return backends.Output{}, backends.Invalidf("sherpa: a live session needs an emit callback")
	}
	f, err := m.asrFields(req, false)
	if err != nil {
		return backends.Output{}, err
	}
	t := &turnState{m: m, hw: f.hotwords}
	defer t.drop()
	turn := 0
	for {
		p, err := req.Live.Next(ctx)
		if errors.Is(err, io.EOF) {
			return backends.Output{}, nil
		}
		if err != nil {
			return backends.Output{}, err
		}
		if p.Clear {
			t.drop()
		}
		if len(p.Samples) > 0 {
			if p.Rate <= 0 {
				return backends.Output{}, backends.Invalidf("sherpa: live audio without a sample rate")
			}
			if err := t.feed(ctx, p.Rate, p.Samples); err != nil {
				return backends.Output{}, err
			}
			if text, changed := t.hypothesis(); changed {
				if err := backends.EmitLive(emit, backends.LiveEvent{Kind: backends.LivePartial, Turn: turn, Text: text}); err != nil {
					return backends.Output{}, err
				}
			}
		}
		if p.Commit {
			text, err := t.finish(ctx)
			if err != nil {
				return backends.Output{}, err
			}
			if err := backends.EmitLive(emit, backends.LiveEvent{Kind: backends.LiveFinal, Turn: turn, Text: text}); err != nil {
				return backends.Output{}, err
			}
			turn++
		}
	}
}

// turnState is the turn in progress: its stream, its resampler and the
// last hypothesis emitted.
type turnState struct {
	m      *model
	stream uintptr
	rs     *audio.Resampler
	rsRate int
	pcm    []int16
	last   string
	hw     string // the request's hotwords, every turn's stream
}

func (t *turnState) drop() {
	if t.stream != 0 {
		t.m.lib.destroyOnStr(t.stream)
	}
	t.stream, t.rs, t.last = 0, nil, ""
}

// feed resamples samples (at rate) to 16 kHz, accepts them and decodes
// every chunk that is ready.
func (t *turnState) feed(ctx context.Context, rate int, samples []int16) error {
	if t.stream == 0 {
		if t.stream = t.m.onlineStream(t.hw); t.stream == 0 {
			return fmt.Errorf("sherpa: could not create a stream")
		}
	}
	if t.rs == nil || t.rsRate != rate {
		if t.rs != nil {
			if err := t.accept(ctx, t.rs.Flush(t.pcm[:0])); err != nil {
				return err
			}
		}
		t.rs, t.rsRate = audio.NewResampler(rate, SampleRate), rate
	}
	t.pcm = t.rs.Write(samples, t.pcm[:0])
	return t.accept(ctx, t.pcm)
}

func (t *turnState) accept(ctx context.Context, pcm []int16) error {
	if len(pcm) == 0 {
		return nil
	}
	p := floatSamples(pcm)
	t.m.lib.acceptOn(t.stream, SampleRate, p, int32(len(pcm)))
	native.Free(p)
	return t.decode(ctx)
}

func (t *turnState) decode(ctx context.Context) error {
	for t.m.lib.onReady(t.m.ptr, t.stream) != 0 {
		hook("online-decode")
		if err := ctx.Err(); err != nil {
			return err // between chunks (sherpa.cancel)
		}
		t.m.lib.decodeOn(t.m.ptr, t.stream)
		hook("online-decoded")
	}
	return nil
}

// text reads the stream's current hypothesis.
func (t *turnState) text() string {
	rp := t.m.lib.onResult(t.m.ptr, t.stream)
	if rp == 0 {
		return ""
	}
	defer t.m.lib.destroyOnRes(rp)
	res := (*onResult)(native.Ptr(rp))
	return strings.TrimSpace(native.GoString(native.Ptr(res.Text)))
}

// hypothesis returns the current hypothesis and whether it changed since
// the last one returned.
func (t *turnState) hypothesis() (string, bool) {
	if t.stream == 0 {
		return "", false
	}
	h := t.text()
	if h == t.last {
		return h, false
	}
	t.last = h
	return h, true
}

// finish ends the turn and returns its transcript ("" for a turn without
// audio).
func (t *turnState) finish(ctx context.Context) (string, error) {
	if t.stream == 0 {
		return "", nil
	}
	if t.rs != nil {
		if err := t.accept(ctx, t.rs.Flush(t.pcm[:0])); err != nil {
			return "", err
		}
	}
	if err := t.accept(ctx, make([]int16, t.m.cfg.tailPadding())); err != nil {
		return "", err
	}
	t.m.lib.onFinished(t.stream)
	if err := t.decode(ctx); err != nil {
		return "", err
	}
	text := t.text()
	t.drop()
	return text, nil
}
