package sndfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

func tone(rate int, seconds float64) []int16 {
	s := make([]int16, int(float64(rate)*seconds))
	for i := range s {
		s[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/float64(rate)))
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	native.SkipUnavailable(t, Load())
	for _, c := range []struct {
		name         string
		format, rate int
		major        int
	}{
		{"wav", FormatWAV | SubPCM16, 16000, FormatWAV},
		{"flac", FormatFLAC | SubPCM16, 22050, FormatFLAC},
		{"vorbis", FormatOGG | SubVorbis, 22050, FormatOGG},
		{"opus", FormatOGG | SubOpus, 24000, FormatOGG},
		{"mp3", FormatMPEG | SubMP3, 22050, FormatMPEG},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := tone(c.rate, 1.5)
			b, err := Encode(context.Background(), in, c.rate, c.format, 1<<24)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Open(context.Background(), bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			info := r.Info()
			var got int
			var buf []int16
			for {
				if buf, err = r.Read(buf); err != nil {
					t.Fatal(err)
				}
				if len(buf) == 0 {
					break
				}
				got += len(buf) / info.Channels
			}
			secs := float64(got) / float64(info.Rate)
			t.Logf("%s: %d bytes, header frames %d rate %d format %#x, decoded %.3f s", c.name, len(b), info.Frames, info.Rate, info.Format, secs)
			if info.Major() != c.major || math.Abs(secs-1.5) > 0.1 {
				t.Fatalf("decoded %.3f s, major %#x", secs, info.Major())
			}
		})
	}
}

func TestEncodeLimit(t *testing.T) {
	native.SkipUnavailable(t, Load())
	if _, err := Encode(context.Background(), tone(16000, 1), 16000, FormatFLAC|SubPCM16, 100); err == nil {
		t.Fatal("a 100-byte limit held a second of FLAC")
	}
}

func TestCancelledRead(t *testing.T) {
	native.SkipUnavailable(t, Load())
	b, err := Encode(context.Background(), tone(16000, 2), 16000, FormatFLAC|SubPCM16, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Open(ctx, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cancel()
	var buf []int16
	for range 100 {
		if buf, err = r.Read(buf); err != nil || len(buf) == 0 {
			break
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v after cancel, want context.Canceled", err)
	}
}

// Concurrent streams keep to their own state: each goroutine's round trip
// decodes its own tone length.
func TestConcurrentStreams(t *testing.T) {
	native.SkipUnavailable(t, Load())
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			secs := 0.2 + 0.1*float64(g)
			b, err := Encode(context.Background(), tone(16000, secs), 16000, FormatFLAC|SubPCM16, 1<<24)
			if err != nil {
				errs <- err
				return
			}
			r, err := Open(context.Background(), bytes.NewReader(b), int64(len(b)))
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			got := 0
			var buf []int16
			for {
				if buf, err = r.Read(buf); err != nil || len(buf) == 0 {
					break
				}
				got += len(buf)
			}
			if want := int(16000 * secs); err == nil && got != want {
				err = fmt.Errorf("goroutine %d: %d frames, want %d", g, got, want)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// An Encoder fed in uneven pieces writes Encode's bytes for the whole
// (the codecs buffer to their own frames), for every format written here;
// Ogg's pages compared without their stream serial and checksum, which
// libsndfile draws at random for every file (two Encodes of the same
// samples differ there too).
func TestEncoderPiecesMatchWhole(t *testing.T) {
	native.SkipUnavailable(t, Load())
	for _, c := range []struct {
		name         string
		format, rate int
	}{
		{"flac", FormatFLAC | SubPCM16, 22050},
		{"opus", FormatOGG | SubOpus, 48000},
		{"mp3", FormatMPEG | SubMP3, 48000},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := tone(c.rate, 1.5)
			whole, err := Encode(context.Background(), in, c.rate, c.format, 1<<24)
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewEncoder(context.Background(), c.rate, c.format, 1<<24, 0)
			if err != nil {
				t.Fatal(err)
			}
			for rest, n := in, 1; len(rest) > 0; n = n*3 + 7 {
				k := min(n, len(rest))
				if err := e.Write(rest[:k]); err != nil {
					e.Abort()
					t.Fatal(err)
				}
				rest = rest[k:]
			}
			got, err := e.Close()
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "opus" {
				got, whole = oggUnserial(t, got), oggUnserial(t, whole)
			}
			if !bytes.Equal(got, whole) {
				t.Fatalf("pieces: %d bytes, whole: %d bytes (or they differ)", len(got), len(whole))
			}
			e.Abort() // after Close: nothing
		})
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
