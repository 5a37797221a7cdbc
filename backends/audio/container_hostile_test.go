package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio/av"
)

// ebml is one EBML element: its ID, its size (8 bytes when long) and body.
func ebml(id string, body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	out := []byte(id)
	if len(b) < 127 {
		out = append(out, 0x80|byte(len(b)))
	} else {
		out = append(out, 0x01, 0, 0, 0, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(out[len(out)-4:], uint32(len(b)))
	}
	return append(out, b...)
}

func ebmlUint(id string, v byte) []byte { return ebml(id, []byte{v}) }

// videoOnlyWebM is a WebM whose one track is VP8 video.
func videoOnlyWebM() []byte {
	head := ebml("\x1a\x45\xdf\xa3", ebmlUint("\x42\x86", 1), ebmlUint("\x42\xf7", 1), ebmlUint("\x42\xf2", 4),
		ebmlUint("\x42\xf3", 8), ebml("\x42\x82", []byte("webm")), ebmlUint("\x42\x87", 2), ebmlUint("\x42\x85", 2))
	info := ebml("\x15\x49\xa9\x66", ebml("\x2a\xd7\xb1", []byte{0x0f, 0x42, 0x40}), ebml("\x4d\x80", []byte("t")), ebml("\x57\x41", []byte("t")))
	track := ebml("\xae", ebmlUint("\xd7", 1), ebmlUint("\x73\xc5", 1), ebmlUint("\x83", 1), ebml("\x86", []byte("V_VP8")),
		ebml("\xe0", ebmlUint("\xb0", 16), ebmlUint("\xba", 16)))
	var blocks [][]byte
	for i := range 10 {
		blocks = append(blocks, ebml("\xa3", []byte{0x81, 0, byte(i * 10), 0x80}, bytes.Repeat([]byte{0x9d}, 40)))
	}
	cluster := ebml("\x1f\x43\xb6\x75", append([][]byte{ebmlUint("\xe7", 0)}, blocks...)...)
	return append(head, ebml("\x18\x53\x80\x67", info, ebml("\x16\x54\xae\x6b", track), cluster)...)
}

// patchMP4Durations sets the mvhd and mdhd durations (version 0) of an
// MP4 to seconds of their timescales.
func patchMP4Durations(t *testing.T, b []byte, seconds uint32) {
	t.Helper()
	for _, atom := range []string{"mvhd", "mdhd"} {
		i := bytes.Index(b, []byte(atom))
		if i < 0 || b[i+4] != 0 {
			t.Fatalf("no version 0 %s", atom)
		}
		binary.BigEndian.PutUint32(b[i+20:], seconds*binary.BigEndian.Uint32(b[i+16:]))
	}
}

// patchWebMDuration sets a WebM's Duration (a float64 of milliseconds).
func patchWebMDuration(t *testing.T, b []byte, ms float64) {
	t.Helper()
	i := bytes.Index(b, []byte{0x44, 0x89, 0x88})
	if i < 0 {
		t.Fatal("no 8-byte Duration element")
	}
	binary.BigEndian.PutUint64(b[i+3:], math.Float64bits(ms))
}

// Hostile container uploads, each a 400 naming the field file, decided
// from the header where the header can say it.
func TestDecodeInputContainerHostile(t *testing.T) {
	needAV(t)
	opus := av.EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000}
	m4a := av.EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 16000}
	want := Want{Rate: 16000, MaxSeconds: 300}
	decode := func(b []byte, w Want) (*countingBlob, error) {
		blob := newBlob(b)
		_, err := DecodeInput(context.Background(), backends.Request{Body: blob}, w)
		return blob, err
	}

	t.Run("truncated", func(t *testing.T) {
		for _, o := range []av.EncodeOptions{opus, m4a, {Muxer: "mp4", Encoder: "aac", Rate: 48000, Options: "movflags=+frag_keyframe+empty_moov+default_base_moof"}} {
			b := containerFile(t, o, tone(o.Rate, 1, 10))
			_, err := decode(b[:len(b)/2], want)
			t.Logf("%s cut in half: %v", o.Muxer, err)
			wantFileError(t, err, "")
		}
	})
	t.Run("header-states-1s-carries-60s", func(t *testing.T) {
		b := containerFile(t, m4a, tone(16000, 1, 60))
		patchMP4Durations(t, b, 1)
		_, err := decode(b, want)
		wantFileError(t, err, "decodes to more than the 1.0 s its header states")
		w := containerFile(t, opus, tone(48000, 1, 60))
		patchWebMDuration(t, w, 1000)
		blob, err := decode(w, want)
		wantFileError(t, err, "decodes to more than the 1.0 s its header states")
		// Cut at the bound: not much past the stated second was read.
		if blob.bytes.Load() > int64(len(w))/10 {
			t.Fatalf("read %d of %d bytes before refusing", blob.bytes.Load(), len(w))
		}
	})
	t.Run("9-channels", func(t *testing.T) {
		b := containerFile(t, opus, tone(48000, 1, 1))
		i := bytes.Index(b, []byte{0x9f, 0x81, 0x01}) // Audio/Channels = 1
		if i < 0 {
			t.Fatal("no Channels element")
		}
		b[i+2] = 9
		blob, err := decode(b, want)
		wantFileError(t, err, "9 channel(s)")
		if blob.bytes.Load() > 64<<10 {
			t.Fatalf("read %d bytes: not refused from the header", blob.bytes.Load())
		}
	})
	t.Run("above-192kHz", func(t *testing.T) {
		b := containerFile(t, opus, tone(48000, 1, 1))
		i := bytes.Index(b, []byte{0xb5, 0x88}) // Audio/SamplingFrequency, float64
		if i < 0 {
			t.Fatal("no SamplingFrequency element")
		}
		binary.BigEndian.PutUint64(b[i+2:], math.Float64bits(384000))
		_, err := decode(b, want)
		wantFileError(t, err, "384000 Hz")
	})
	t.Run("webm-video-only", func(t *testing.T) {
		_, err := decode(videoOnlyWebM(), want)
		wantFileError(t, err, "has no audio track")
	})
	t.Run("mp4-not-aac", func(t *testing.T) {
		for _, o := range []av.EncodeOptions{{Muxer: "ipod", Encoder: "alac", Rate: 16000}, {Muxer: "mp4", Encoder: "libopus", Rate: 48000}} {
			b := containerFile(t, o, tone(o.Rate, 1, 1))
			_, err := decode(b, want)
			wantFileError(t, err, "is not supported: WebM with Opus or Vorbis, MP4/M4A or ADTS with AAC")
		}
	})
	t.Run("matroska-aac", func(t *testing.T) {
		b := containerFile(t, av.EncodeOptions{Muxer: "matroska", Encoder: "aac", Rate: 16000}, tone(16000, 1, 1))
		_, err := decode(b, want)
		wantFileError(t, err, "carrying aac is not supported")
	})
	t.Run("mp4-declares-2G-samples", func(t *testing.T) {
		// A fragment's trun declaring 2^31 samples in 4 bytes: FFmpeg 5.1
		// allocates for every declared sample before reading them (4M
		// declared in a 1 KB file raised its peak RSS by 34 MB).
		b := containerFile(t, av.EncodeOptions{Muxer: "mp4", Encoder: "aac", Rate: 16000, Options: "movflags=+frag_keyframe+empty_moov+default_base_moof"}, tone(16000, 1, 1))
		i := bytes.Index(b, []byte("trun"))
		if i < 0 {
			t.Fatal("no trun")
		}
		binary.BigEndian.PutUint32(b[i+8:], 1<<31)
		blob, err := decode(b, want)
		wantFileError(t, err, "declares 2147483")
		if blob.bytes.Load() > 4096 {
			t.Fatalf("read %d bytes to refuse it", blob.bytes.Load())
		}
		// The sample table of a plain M4A too.
		b = containerFile(t, m4a, tone(16000, 1, 1))
		i = bytes.Index(b, []byte("stsz"))
		binary.BigEndian.PutUint32(b[i+12:], 1<<30)
		_, err = decode(b, want)
		wantFileError(t, err, "declares 1073741")
	})
	t.Run("over-the-limit", func(t *testing.T) {
		// From the header: a fraction of the file read, nothing decoded.
		for _, o := range []av.EncodeOptions{opus, m4a} {
			b := containerFile(t, o, tone(o.Rate, 1, 60))
			blob, err := decode(b, Want{Rate: 16000, MaxSeconds: 5})
			wantFileError(t, err, "longer than this model's limit of 5 s")
			t.Logf("%s: read %d of %d bytes before refusing", o.Muxer, blob.bytes.Load(), len(b))
		}
		// MediaRecorder's WebM states no duration: the decode stops at the limit.
		b := containerFile(t, av.EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000, Streamable: true}, tone(48000, 1, 60))
		blob, err := decode(b, Want{Rate: 16000, MaxSeconds: 5})
		wantFileError(t, err, "longer than this model's limit of 5 s")
		if blob.bytes.Load() > int64(len(b))/5 {
			t.Fatalf("read %d of %d bytes: not stopped at the limit", blob.bytes.Load(), len(b))
		}
	})
}

// audio.decode-cancel for container uploads: once the context ends no
// further read is made and the error is the context's.
func TestDecodeInputContainerStopsWhenContextEnds(t *testing.T) {
	needAV(t)
	for _, o := range []av.EncodeOptions{{Muxer: "webm", Encoder: "libopus", Rate: 48000, Streamable: true}, {Muxer: "ipod", Encoder: "aac", Rate: 16000}} {
		b := containerFile(t, o, tone(o.Rate, 1, 30))
		ctx, cancel := context.WithCancel(context.Background())
		blob := newBlob(b)
		var at int64 = -1
		blob.before = func(n int64) {
			if at < 0 && blob.bytes.Load() > int64(len(b))/4 {
				at = n
				cancel()
			}
		}
		_, err := DecodeInput(ctx, backends.Request{Body: blob}, Want{Rate: 16000, MaxSeconds: 300})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: got %v, want an error wrapping context.Canceled", o.Muxer, err)
		}
		if n := blob.reads.Load(); n != at {
			t.Fatalf("%s: %d reads, want %d: decoding went on after the context ended", o.Muxer, n, at)
		}
	}
}

// Random damage (seeded, so every run is the same) to small WebM, M4A and
// ADTS files: each a 400 naming file or a decode within the limit, never
// a crash or another error.
func TestDecodeInputMutatedContainers(t *testing.T) {
	needAV(t)
	var seeds [][]byte
	for _, c := range containerUploads {
		if c.opts.Channels == 0 {
			seeds = append(seeds, containerFile(t, c.opts, tone(c.opts.Rate, 1, 0.3)))
		}
	}
	rng := rand.New(rand.NewPCG(34, 2))
	outcomes := map[string]int{}
	for i := range 3000 {
		b := mutate(rng, seeds[i%len(seeds)])
		a, err := DecodeInput(context.Background(), backends.Request{Data: b}, Want{Rate: 16000, MaxSeconds: 1})
		if err != nil && !errors.Is(err, backends.ErrInvalid) {
			t.Fatalf("mutation %d: error does not wrap ErrInvalid: %v", i, err)
		}
		if err == nil && a.Seconds() > 1+0.01 {
			t.Fatalf("mutation %d: %.2f s accepted over a 1 s limit", i, a.Seconds())
		}
		outcome := "decoded"
		for _, o := range []string{"declares", "could not be decoded", "is truncated", "decodes to more", "holds no samples", "has no audio track", "channel(s)", "longer than", "is not supported"} {
			if err != nil && strings.Contains(err.Error(), o) {
				outcome = o
			}
		}
		if err != nil && outcome == "decoded" {
			outcome = err.Error()
		}
		outcomes[outcome]++
	}
	t.Logf("outcomes: %v", outcomes)
}
