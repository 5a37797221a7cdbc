package audio

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/internal/sndfile"
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

// CodecWriter encodes a speech answer as mp3, opus or flac from samples
// fed in pieces (Write), resampled to a rate the codec takes as Encode
// does, with one resampler across the pieces: the bytes are Encode's for
// the concatenated samples (Ogg Opus too: the serial libsndfile draws
// for every file is replaced by one derived from the content). It holds the encoded output and the
// codec's state, not the PCM. Not safe for concurrent use; Close or Abort
// frees it.
type CodecWriter struct {
	c    codec
	rs   *Resampler // nil when the codec takes the rate
	enc  *sndfile.Encoder
	out  []int16
	fed  int64 // samples at the codec's rate so far
	done bool
}

// NewCodecWriter returns a CodecWriter of format ("mp3", "opus" or
// "flac") for samples at rate, stopping when ctx ends. Another format
// (aac: FFmpeg's encoder takes the whole input) is invalid.
func NewCodecWriter(ctx context.Context, format string, rate int) (*CodecWriter, error) {
	c, ok := codecs[format]
	if !ok {
		return nil, backends.Invalidf("audio: cannot encode %q in pieces (mp3, opus or flac)", format)
	}
	w := &CodecWriter{c: c}
	to := codecRate(c.rates, rate)
	if to != rate {
		w.rs = NewResampler(rate, to)
	}
	enc, err := sndfile.NewEncoder(ctx, to, c.format, 1<<20, 0)
	if err != nil {
		return nil, fmt.Errorf("audio: encoding %s: %w", format, err)
	}
	w.enc = enc
	return w, nil
}

// Write encodes the next piece of samples.
func (w *CodecWriter) Write(samples []int16) error {
	if w.rs != nil {
		w.out = w.rs.Write(samples, w.out[:0])
		samples = w.out
	}
	return w.encode(samples)
}

func (w *CodecWriter) encode(samples []int16) error {
	// Encode's bound, on the samples so far: every codec here writes
	// less than PCM16 plus its headers.
	w.fed += int64(len(samples))
	w.enc.SetLimit(4*w.fed + 1<<20)
	if err := w.enc.Write(samples); err != nil {
		return fmt.Errorf("audio: encoding: %w", err)
	}
	return nil
}

// Close finishes the file and returns its bytes and content type.
func (w *CodecWriter) Close() ([]byte, string, error) {
	if w.rs != nil {
		if err := w.encode(w.rs.Flush(w.out[:0])); err != nil {
			w.Abort()
			return nil, "", err
		}
	}
	w.done = true
	b, err := w.enc.Close()
	if err != nil {
		return nil, "", fmt.Errorf("audio: encoding: %w", err)
	}
	return b, w.c.contentType, nil
}

// Abort frees the writer without finishing the file; after Close it does
// nothing.
func (w *CodecWriter) Abort() {
	if !w.done {
		w.done = true
		w.enc.Abort()
	}
}
