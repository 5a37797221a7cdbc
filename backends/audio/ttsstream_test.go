package audio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// The chunks of a synthesis, in whatever pieces the engine makes it, are
// the bytes of the whole answer: one resampler across the pieces (the
// same filter over the same stream as EncodeTTS's), each chunk at most
// MaxChunkSamples, and an emit error ends the writing.
func TestChunkEmitterMatchesWhole(t *testing.T) {
	// Sentences of uneven lengths, one longer than a chunk.
	var pieces [][]int16
	for i, n := range []int{5000, 17, 70000, 1, 12345} {
		pieces = append(pieces, sine(22050, 300+float64(100*i), 4, 8000)[:n])
	}
	var all []int16
	for _, p := range pieces {
		all = append(all, p...)
	}
	for _, to := range []int{0, 22050, 24000, 48000, 8000} {
		t.Run(fmt.Sprint(to), func(t *testing.T) {
			r := TTSRequest{Text: "x", Format: "pcm", SampleRate: to}
			whole, err := EncodeTTS(context.Background(), r, 22050, all)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			want := to
			if want == 0 {
				want = 22050
			}
			c := NewChunkEmitter(context.Background(), func(b json.RawMessage) error {
				pcm, rate, err := DecodeChunk(b)
				if err != nil || rate != want || len(pcm) == 0 || len(pcm) > 2*MaxChunkSamples {
					return fmt.Errorf("chunk of %d bytes at %d Hz: %v", len(pcm), rate, err)
				}
				got = append(got, pcm...)
				return nil
			}, r)
			for _, p := range pieces {
				if err := c.Write(22050, p); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, whole.Data) {
				t.Fatalf("%d bytes streamed, the whole file has %d (or they differ)", len(got), len(whole.Data))
			}
		})
	}
	stop := errors.New("gone")
	c := NewChunkEmitter(context.Background(), func(json.RawMessage) error { return stop }, TTSRequest{SampleRate: 48000})
	if err := c.Write(22050, all); !errors.Is(err, stop) {
		t.Fatalf("emit error: got %v", err)
	}
	// A context that ends stops the rest of a piece longer than a chunk.
	ctx, cancel := context.WithCancel(context.Background())
	sent := 0
	c = NewChunkEmitter(ctx, func(json.RawMessage) error { sent++; cancel(); return nil }, TTSRequest{})
	if err := c.Write(22050, all); !errors.Is(err, context.Canceled) || sent != 1 {
		t.Fatalf("after the context ended: %d chunks, %v", sent, err)
	}
}

// A CodecWriter fed a synthesis in pieces writes Encode's bytes for the
// whole, resampled to the codec's rate by one resampler across the pieces
// (Ogg Opus compared without the stream serial and checksum libsndfile
// draws for every file).
func TestCodecWriterMatchesEncode(t *testing.T) {
	for _, c := range []struct {
		format string
		rate   int
	}{{"mp3", 20000}, {"opus", 22050}, {"flac", 22050}} {
		t.Run(c.format, func(t *testing.T) {
			in := sine(c.rate, 440, 2, 8000)
			whole, ct, _, err := Encode(context.Background(), c.format, c.rate, in)
			if err != nil {
				t.Fatal(err)
			}
			w, err := NewCodecWriter(context.Background(), c.format, c.rate)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			for rest, n := in, 5; len(rest) > 0; n = n*2 + 3 {
				k := min(n, len(rest))
				if err := w.Write(rest[:k]); err != nil {
					t.Fatal(err)
				}
				rest = rest[k:]
			}
			got, gotCT, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if c.format == "opus" {
				got, whole = oggUnserial(t, got), oggUnserial(t, whole)
			}
			if gotCT != ct || !bytes.Equal(got, whole) {
				t.Fatalf("pieces: %d bytes %q; whole: %d bytes %q (or they differ)", len(got), gotCT, len(whole), ct)
			}
		})
	}
	if _, err := NewCodecWriter(context.Background(), "aac", 16000); err == nil {
		t.Fatal("aac in pieces: no error")
	}
}

// oggUnserial returns b with every Ogg page's serial number and checksum
// zeroed.
func oggUnserial(t *testing.T, b []byte) []byte {
	t.Helper()
	b = bytes.Clone(b)
	for p := 0; p < len(b); {
		if len(b)-p < 27 || string(b[p:p+4]) != "OggS" {
			t.Fatalf("no Ogg page at %d", p)
		}
		clear(b[p+14 : p+18])
		clear(b[p+22 : p+26])
		n := int(b[p+26])
		size := 27 + n
		for _, s := range b[p+27 : p+27+n] {
			size += int(s)
		}
		p += size
	}
	return b
}
