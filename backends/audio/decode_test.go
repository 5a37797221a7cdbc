package audio

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/internal/sndfile"
)

// countingBlob is a backends.Blob that counts the bytes and calls read
// through it, and can run a hook before each read.
type countingBlob struct {
	r      *bytes.Reader
	bytes  atomic.Int64
	reads  atomic.Int64
	before func(n int64) // called with the read's number (1, 2, ...)
}

func newBlob(b []byte) *countingBlob { return &countingBlob{r: bytes.NewReader(b)} }

func (c *countingBlob) Size() int64 { return c.r.Size() }

func (c *countingBlob) ReadAt(p []byte, off int64) (int, error) {
	n := c.reads.Add(1)
	if c.before != nil {
		c.before(n)
	}
	got, err := c.r.ReadAt(p, off)
	c.bytes.Add(int64(got))
	return got, err
}

// wavClaiming returns a mono PCM16 WAV at rate whose data size field says
// claimed bytes while only body follows.
func wavClaiming(rate int, claimed uint32, body []byte) []byte {
	h := header(rate, claimed)
	return append(h, body...)
}

// audio.duration-limit: a header stating 10 hours is refused at once, from
// the header alone: the decoder reads a few dozen bytes of a 1 MiB upload.
func TestDecodeInputRefusesStatedDurationBeforeDecoding(t *testing.T) {
	tenHours := uint32(16000 * 2 * 36000)
	blob := newBlob(wavClaiming(16000, tenHours, make([]byte, 1<<20)))
	_, err := DecodeInput(context.Background(), backends.Request{Body: blob}, Want{Rate: 16000, MaxSeconds: 300})
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "36000.0 s") || !strings.Contains(err.Error(), "300 s") {
		t.Fatalf("got %v, want ErrInvalid naming 36000.0 s and the 300 s limit", err)
	}
	if n := blob.bytes.Load(); n > 64 {
		t.Fatalf("read %d bytes of the upload before refusing it, want only the header (<= 64)", n)
	}
}

// A genuine long file (its size field honest) is refused the same way,
// with no samples decoded, whatever the source rate.
func TestDecodeInputRefusesLongAudioWithoutDecoding(t *testing.T) {
	for _, rate := range []int{1009, 16000, 44100} {
		wav := WAV(rate, make([]int16, 3*rate)) // 3 s
		blob := newBlob(wav)
		_, err := DecodeInput(context.Background(), backends.Request{Body: blob}, Want{Rate: 16000, MaxSeconds: 2})
		if !errors.Is(err, backends.ErrInvalid) {
			t.Fatalf("%d Hz: got %v, want ErrInvalid", rate, err)
		}
		if n := blob.bytes.Load(); n > 64 {
			t.Fatalf("%d Hz: read %d bytes, want only the header", rate, n)
		}
		// Within the limit it decodes, from Body rather than Data.
		a, err := DecodeInput(context.Background(), backends.Request{Body: newBlob(wav), Data: []byte("ignored")}, Want{Rate: 16000, MaxSeconds: 3})
		if err != nil || a.Rate != 16000 || len(a.Samples) != 3*16000 {
			t.Fatalf("%d Hz within the limit: %d samples at %d, %v", rate, len(a.Samples), a.Rate, err)
		}
	}
}

// A data chunk shorter than its size field decodes what is there, and the
// limit applies to the stated size unless the size says "unknown".
func TestDecodeInputTruncatedAndStreamed(t *testing.T) {
	in := sine(16000, 300, 0.5, 8000)
	body := PCM16Bytes(in)
	for name, wav := range map[string][]byte{
		"truncated": wavClaiming(16000, uint32(2*len(in)+1000), body),
		"streamed":  append(StreamHeader(16000), body...),
		"ffff":      wavClaiming(16000, 0xFFFFFFFF, body),
	} {
		a, err := DecodeInput(context.Background(), backends.Request{Data: wav}, Want{Rate: 16000, MaxSeconds: 1})
		if err != nil || !equal(a.Samples, in) {
			t.Errorf("%s: %d samples, %v", name, len(a.Samples), err)
		}
	}
}

// Cancellation stops decoding between chunks: once the context ends no
// further chunk is read and the error is the context's.
func TestDecodeInputStopsWhenContextEnds(t *testing.T) {
	wav := WAV(1009, sine(1009, 200, 200, 8000)) // ~400 KB: several chunks
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blob := newBlob(wav)
	const cancelAt = 6 // the header takes 4 reads (RIFF, fmt, its body, data), then chunks
	blob.before = func(n int64) {
		if n == cancelAt {
			cancel()
		}
	}
	_, err := DecodeInput(ctx, backends.Request{Body: blob}, Want{Rate: 16000, MaxSeconds: 300})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an error wrapping context.Canceled", err)
	}
	if n := blob.reads.Load(); n != cancelAt {
		t.Fatalf("%d reads, want %d: decoding went on after the context ended", n, cancelAt)
	}
	if total := int64(len(wav)); blob.bytes.Load() >= total/2 {
		t.Fatalf("read %d of %d bytes", blob.bytes.Load(), total)
	}
}

// audio.unknown-format: anything that is not a WAV file, with no declared
// raw rate, is refused: never read as raw PCM.
func TestDecodeInputRefusesUnknownFormats(t *testing.T) {
	cases := map[string][]byte{
		"mp3 id3":  append([]byte("ID3\x04\x00\x00\x00\x00\x00\x00"), make([]byte, 4000)...),
		"mp3 sync": append([]byte{0xFF, 0xFB, 0x90, 0x64}, make([]byte, 4000)...),
		"ogg":      append([]byte("OggS\x00\x02"), make([]byte, 100)...),
		"text":     []byte("hello, this is a text file and not audio\n"),
		"riff avi": append([]byte("RIFF\x10\x00\x00\x00AVI LIST"), make([]byte, 16)...),
		"pcm":      PCM16Bytes(sine(16000, 300, 0.1, 8000)),
	}
	for name, b := range cases {
		_, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 300})
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	_, err := DecodeInput(context.Background(), backends.Request{Data: cases["mp3 id3"]}, Want{Rate: 16000, MaxSeconds: 300})
	if err == nil || !strings.Contains(err.Error(), "MP3") {
		t.Errorf("mp3: message %v should name MP3", err)
	}
	if _, err := DecodeInput(context.Background(), backends.Request{}, Want{Rate: 16000, MaxSeconds: 300}); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("empty: got %v", err)
	}
}

// audio.raw-declared: raw PCM16LE is read only at a declared rate, within
// MinRate..MaxRate, and its duration counts against the limit.
func TestDecodeInputRawNeedsDeclaredRate(t *testing.T) {
	in := sine(8000, 300, 0.5, 8000)
	raw := PCM16Bytes(in)
	a, err := DecodeInput(context.Background(), backends.Request{Data: raw}, Want{Rate: 16000, MaxSeconds: 1, RawRate: 8000})
	if err != nil || a.Rate != 16000 || len(a.Samples) != 8000 {
		t.Fatalf("declared raw: %d samples at %d, %v", len(a.Samples), a.Rate, err)
	}
	for name, w := range map[string]Want{
		"undeclared": {Rate: 16000, MaxSeconds: 1},
		"too low":    {Rate: 16000, MaxSeconds: 1, RawRate: 10},
		"too high":   {Rate: 16000, MaxSeconds: 1, RawRate: 10_000_000},
		"too long":   {Rate: 16000, MaxSeconds: 0.25, RawRate: 8000},
	} {
		if _, err := DecodeInput(context.Background(), backends.Request{Data: raw}, w); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := DecodeInput(context.Background(), backends.Request{Data: raw[:11]}, Want{Rate: 16000, MaxSeconds: 1, RawRate: 8000}); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("odd raw: got %v", err)
	}
}

// A hostile header of many empty chunks is bounded.
func TestDecodeInputBoundsChunkWalk(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("RIFF\x00\x00\x00\x00WAVE")
	for range maxRIFFChunks + 10 {
		b.WriteString("junk\x00\x00\x00\x00")
	}
	blob := newBlob(b.Bytes())
	if _, err := DecodeInput(context.Background(), backends.Request{Body: blob}, Want{Rate: 16000, MaxSeconds: 1}); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	if n := blob.reads.Load(); n > maxRIFFChunks+2 {
		t.Fatalf("%d reads", n)
	}
}

// Decoding memory is the output plus a constant: a 1009 Hz file decoded to
// 16 kHz allocates about its output, not the input twice over or per
// sample.
func TestDecodeInputMemoryBound(t *testing.T) {
	wav := WAV(1009, sine(1009, 200, 60, 8000))
	want := Want{Rate: 16000, MaxSeconds: 300}
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := DecodeInput(context.Background(), backends.Request{Body: newBlob(wav)}, want); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 40 {
		t.Fatalf("%.0f allocations per decode, want a constant (<= 40)", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a, err := DecodeInput(context.Background(), backends.Request{Body: newBlob(wav)}, want)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	out := int64(2 * len(a.Samples))
	if got := int64(after.TotalAlloc - before.TotalAlloc); got > out+1<<20 {
		t.Fatalf("allocated %d bytes for %d bytes of output (and %d of input), want the output plus < 1 MiB", got, out, len(wav))
	}
	if len(a.Samples) != cap(a.Samples) {
		t.Fatalf("output %d samples in a buffer of %d: not preallocated from the header", len(a.Samples), cap(a.Samples))
	}
}

func FuzzDecodeInput(f *testing.F) {
	f.Add(WAV(16000, []int16{1, -1, 300}), 0)
	f.Add(wavOf(formatFloat, 2, 8000, 32, f32(0.1, 0.2)), 0)
	f.Add(wavClaiming(1009, 0xFFFFFFFF, []byte{1, 2, 3, 4}), 0)
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVE"), 0)
	f.Add([]byte("ID3\x03"), 0)
	f.Add([]byte{1, 2, 3, 4}, 8000)
	if sndfile.Load() == nil {
		for _, c := range uploadFormats {
			f.Add(encoded(f, c.format, c.rate, 0.05), 0)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, rawRate int) {
		a, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 30, RawRate: rawRate})
		if err != nil {
			if !errors.Is(err, backends.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if a.Rate != 16000 || len(a.Samples) == 0 || a.Seconds() > 30+1.0/MinRate {
			t.Fatalf("accepted %d samples at %d", len(a.Samples), a.Rate)
		}
	})
}
