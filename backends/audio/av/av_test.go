package av

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

func need(t *testing.T) {
	t.Helper()
	native.SkipUnavailable(t, Load())
}

func tone(rate int, seconds float64) []int16 {
	s := make([]int16, int(float64(rate)*seconds))
	for i := range s {
		s[i] = int16(8000 * math.Sin(2*math.Pi*300*float64(i)/float64(rate)))
	}
	return s
}

// decodeAll decodes b in c to mono at rate.
func decodeAll(ctx context.Context, b []byte, c Container, rate int) (Info, []int16, error) {
	d, err := Open(ctx, bytes.NewReader(b), int64(len(b)), c)
	if err != nil {
		return Info{}, nil, err
	}
	defer d.Close()
	if err := d.Start(rate, Bounds{8, 192000, 192000}); err != nil {
		return d.Info(), nil, err
	}
	var out []int16
	for {
		var done bool
		if out, done, err = d.Next(out); err != nil || done {
			return d.Info(), out, err
		}
	}
}

// The header's facts come before decoding, and the decode gives the
// duration at the requested rate.
func TestEncodeDecode(t *testing.T) {
	need(t)
	for _, c := range []struct {
		o     EncodeOptions
		c     Container
		codec string
	}{
		{EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000}, WebM, "opus"},
		{EncodeOptions{Muxer: "webm", Encoder: "libvorbis", Rate: 32000}, WebM, "vorbis"},
		{EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 22050}, MP4, "aac"},
		{EncodeOptions{Muxer: "adts", Encoder: "aac", Rate: 24000}, ADTS, "aac"},
	} {
		c.o.Limit = 1 << 24
		b, err := Encode(context.Background(), c.o, tone(c.o.Rate, 1))
		if err != nil {
			t.Fatal(err)
		}
		info, out, err := decodeAll(context.Background(), b, c.c, 16000)
		if err != nil || info.Codec != c.codec || info.Channels != 1 || info.Rate != c.o.Rate {
			t.Fatalf("%s/%s: %+v, %v", c.o.Muxer, c.o.Encoder, info, err)
		}
		if got := float64(len(out)) / 16000; math.Abs(got-1) > 0.15 {
			t.Fatalf("%s/%s: %.3f s decoded", c.o.Muxer, c.o.Encoder, got)
		}
	}
}

// A context already ended stops the demuxer at its first read.
func TestOpenStopsWithContext(t *testing.T) {
	need(t)
	b, err := Encode(context.Background(), EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 16000, Limit: 1 << 24}, tone(16000, 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := decodeAll(ctx, b, MP4, 16000); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Output past the limit fails (memory bounded), unknown encoders and
// muxers are named.
func TestEncodeRefusals(t *testing.T) {
	need(t)
	if _, err := Encode(context.Background(), EncodeOptions{Muxer: "adts", Encoder: "aac", Rate: 16000, Limit: 1000}, tone(16000, 2)); err == nil {
		t.Fatal("2 s of aac fit in 1000 bytes")
	}
	if _, err := Encode(context.Background(), EncodeOptions{Muxer: "adts", Encoder: "nope", Rate: 16000, Limit: 1 << 20}, tone(16000, 1)); err == nil || !strings.Contains(err.Error(), "no such encoder") {
		t.Fatalf("unknown encoder: %v", err)
	}
	if _, err := Encode(context.Background(), EncodeOptions{Muxer: "nope", Encoder: "aac", Rate: 16000, Limit: 1 << 20}, tone(16000, 1)); err == nil || !strings.Contains(err.Error(), "no such muxer") {
		t.Fatalf("unknown muxer: %v", err)
	}
	if _, err := Encode(context.Background(), EncodeOptions{Muxer: "adts", Encoder: "aac", Rate: 16000, Channels: 2, Limit: 1 << 20}, []int16{1, 2, 3}); err == nil {
		t.Fatal("3 samples taken as stereo frames")
	}
}

func TestADTSHeader(t *testing.T) {
	for _, c := range []struct {
		h        string
		ch, rate int
	}{
		{"\xff\xf1\x50\x80", 2, 44100}, // LC, index 4, 2 channels
		{"\xff\xf1\x58\x40", 1, 24000}, // index 6, 1 channel
		{"\xff\xf1\x51\xc0", 8, 44100}, // configuration 7: 8 channels
		{"\xff\xf1\x7c\x40", 1, 0},     // index 15: none
		{"\xff\xfb\x90\x64", 0, 0},     // MP3
		{"\xff\xf1", 0, 0},             // short
	} {
		if ch, rate := adtsHeader(bytes.NewReader([]byte(c.h))); ch != c.ch || rate != c.rate {
			t.Errorf("% x: %d channels at %d Hz, want %d at %d", c.h, ch, rate, c.ch, c.rate)
		}
	}
}

// Decoders run concurrently, some stopped mid-way by their contexts.
func TestConcurrentDecodes(t *testing.T) {
	need(t)
	b, err := Encode(context.Background(), EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000, Limit: 1 << 24}, tone(48000, 2))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d, err := Open(ctx, bytes.NewReader(b), int64(len(b)), WebM)
			if err != nil {
				errs <- err
				return
			}
			defer d.Close()
			if err := d.Start(16000, Bounds{8, 192000, 192000}); err != nil {
				errs <- err
				return
			}
			var out []int16
			for n := 0; ; n++ {
				if i%2 == 1 && n == 20 {
					cancel() // the odd ones stop after 20 packets
				}
				var done bool
				out, done, err = d.Next(out)
				if err != nil || done {
					break
				}
			}
			switch {
			case i%2 == 1 && !errors.Is(err, context.Canceled):
				errs <- fmt.Errorf("decoder %d: %v, want context.Canceled", i, err)
			case i%2 == 0 && (err != nil || len(out) < 31000):
				errs <- fmt.Errorf("decoder %d: %d samples, %v", i, len(out), err)
			default:
				errs <- nil
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
