package audio

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/sluice-dev/sluice/backends"
)

// MaxChunkSamples bounds the samples of one streamed Chunk: a long
// sentence (eSpeak's at speed 0.25 is over a minute) goes out in pieces
// of at most this many samples, so what a chunk costs in flight (its
// PCM, base64 and JSON, and the server's decoded copy) does not grow
// with the sentence.
const MaxChunkSamples = 1 << 15

// ChunkEmitter sends a synthesis, in the pieces the engine makes it,
// through emit as Chunks at the rate the request asks for. One Resampler
// runs across every piece, so the concatenated chunks are exactly the
// samples EncodeTTS writes for the whole synthesis (the same filter over
// the same stream; resampling each sentence on its own would zero-pad
// every sentence's edges). What it holds is the resampler's window and
// one chunk, whatever the text's length. Not safe for concurrent use.
type ChunkEmitter struct {
	ctx   context.Context
	emit  backends.Emit
	to    int // the request's rate, 0: the engine's
	from  int // the engine's rate of the pieces so far, 0 before the first
	rs    *Resampler
	out   []int16
	index int
}

// NewChunkEmitter returns a ChunkEmitter sending r's audio through emit
// until ctx ends (then each Write and Close returns ctx's error, before
// sending the rest of a piece: a sentence longer than a chunk is not sent
// on to a client that left).
func NewChunkEmitter(ctx context.Context, emit backends.Emit, r TTSRequest) *ChunkEmitter {
	return &ChunkEmitter{ctx: ctx, emit: emit, to: r.SampleRate}
}

// Write takes the next piece of the synthesis, samples at rate, and emits
// every output sample it completes. A change of rate ends the resampled
// stream so far (Flush) and starts another.
func (c *ChunkEmitter) Write(rate int, samples []int16) error {
	if rate != c.from {
		if err := c.Close(); err != nil {
			return err
		}
		c.from, c.rs = rate, nil
		if c.to != 0 && c.to != rate {
			c.rs = NewResampler(rate, c.to)
		}
	}
	if c.rs == nil {
		return c.send(rate, samples)
	}
	for len(samples) > 0 {
		n := min(len(samples), MaxChunkSamples)
		c.out = c.rs.Write(samples[:n], c.out[:0])
		samples = samples[n:]
		if err := c.send(c.to, c.out); err != nil {
			return err
		}
	}
	return nil
}

// Close emits what the resampler still holds (the last half-kernel of
// output). The synthesis is then complete; a later Write starts afresh.
func (c *ChunkEmitter) Close() error {
	if c.rs == nil {
		return nil
	}
	c.out = c.rs.Flush(c.out[:0])
	c.rs, c.from = nil, 0
	return c.send(c.to, c.out)
}

// send emits samples at rate as chunks of at most MaxChunkSamples.
func (c *ChunkEmitter) send(rate int, samples []int16) error {
	for len(samples) > 0 {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		n := min(len(samples), MaxChunkSamples)
		b, err := json.Marshal(Chunk{Index: c.index, SampleRate: rate, Audio: base64.StdEncoding.EncodeToString(PCM16Bytes(samples[:n]))})
		if err != nil {
			return fmt.Errorf("audio: chunk: %w", err)
		}
		c.index++
		if err := c.emit(b); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return nil
}
