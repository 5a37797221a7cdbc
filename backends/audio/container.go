package audio

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio/av"
)

// WebM/Matroska, MP4/M4A and ADTS uploads (what browsers' MediaRecorder,
// phones and Android's AAC recorder write) go through Debian's FFmpeg
// libraries by way of backends/audio/av (CONTRACT.md audio.container-input):
// the container is named from the first bytes, never probed, and only
// Opus or Vorbis in WebM and AAC in MP4 or ADTS are decoded; anything else
// is refused naming the field file. The header's codec, channels, rate
// and duration are checked before any packet is decoded (audio.duration-limit,
// engine.upload-bounds); decoding then runs one packet at a time under the
// request's context, stops at the model's limit, refuses a file that
// decodes well past (a lie) or well short of (truncated) the duration its
// header states, and bounds the
// packets read by the limit, so the cost follows the audio's duration.

const (
	// statedSlack is how far past its stated duration a file may decode
	// (codec delay, priming and padding are milliseconds) before it is
	// refused as lying: statedSlackSeconds plus statedSlackFraction of it.
	statedSlackSeconds  = 0.5
	statedSlackFraction = 0.02
	// packetsPerSecond bounds the packets decoded per second of the
	// model's limit: Opus's shortest frame is 2.5 ms (400 a second), AAC's
	// and Vorbis's are longer, so a file of packets that decode to nothing
	// cannot make the work.
	packetsPerSecond = 500
	// maxUnboundedPackets bounds the packets of a decode with no duration
	// limit (Decode of an in-memory payload): about 12 hours of AAC.
	maxUnboundedPackets = 1 << 22
	// maxPrealloc caps the samples preallocated from a stated duration
	// when no limit applies (Decode of an in-memory payload).
	maxPrealloc = 1 << 23
)

// containerName names the FFmpeg container b starts with (0 and "" for
// none).
func containerName(b []byte) (av.Container, string) {
	switch {
	case len(b) >= 4 && string(b[:4]) == "\x1aE\xdf\xa3":
		return av.WebM, "WebM/Matroska audio"
	case len(b) >= 8 && string(b[4:8]) == "ftyp":
		return av.MP4, "MP4/M4A audio"
	case len(b) >= 2 && b[0] == 0xFF && b[1]&0xF6 == 0xF0: // MPEG sync, layer 0: ADTS (MP3 is layer 1)
		return av.ADTS, "AAC (ADTS) audio"
	}
	return 0, ""
}

// containerCodecs lists the codecs decoded in each container.
var containerCodecs = map[av.Container][]string{
	av.WebM: {"opus", "vorbis"},
	av.MP4:  {"aac"},
	av.ADTS: {"aac"},
}

// decodeContainer decodes the upload src in container c (named name) to
// mono PCM16 at rate (0: the header's rate). maxSeconds > 0 bounds the
// duration, from the header before decoding and again while decoding.
func decodeContainer(ctx context.Context, src backends.Blob, c av.Container, name string, rate int, maxSeconds float64) (Audio, error) {
	maxPackets := int64(maxUnboundedPackets)
	if maxSeconds > 0 {
		maxPackets = int64(math.Ceil(maxSeconds*packetsPerSecond)) + 100
	}
	if c == av.MP4 {
		// Before FFmpeg indexes them: see mp4walk.go.
		n, err := mp4Samples(src, src.Size())
		if err != nil {
			return Audio{}, fileErr("%s could not be read: %v", name, err)
		}
		if n > maxPackets {
			return Audio{}, fileErr("%s declares %d samples, more than the %d that %g s of audio may have", name, n, maxPackets, maxSeconds)
		}
	}
	d, err := av.Open(ctx, src, src.Size(), c)
	if err != nil {
		return Audio{}, containerErr(ctx, name, err)
	}
	defer d.Close()
	info := d.Info()
	if !allowed(c, info.Codec) {
		return Audio{}, fileErr("%s carrying %s is not supported: WebM with Opus or Vorbis, MP4/M4A or ADTS with AAC", name, info.Codec)
	}
	// engine.upload-bounds: from the header, before decoding.
	if err := checkUpload("the "+name, info.Channels, info.Rate); err != nil {
		return Audio{}, err
	}
	if rate == 0 {
		rate = info.Rate
	}
	// audio.duration-limit: refused from the header, before decoding.
	if maxSeconds > 0 && info.Seconds > maxSeconds {
		return Audio{}, backends.InvalidParam("file", "audio: %.1f s of audio, longer than this model's limit of %g s", info.Seconds, maxSeconds)
	}
	if err := d.Start(rate, av.Bounds{Channels: MaxUploadChannels, Rate: MaxUploadRate, TotalPerSec: MaxUploadSampleRate}); err != nil {
		return Audio{}, containerErr(ctx, name, err)
	}
	maxOut := int64(math.MaxInt64)
	if maxSeconds > 0 {
		maxOut = int64(math.Ceil(maxSeconds * float64(rate)))
	}
	stated := int64(math.MaxInt64)
	var out []int16
	if info.Seconds > 0 {
		stated = int64(math.Ceil((info.Seconds*(1+statedSlackFraction) + statedSlackSeconds) * float64(rate)))
		out = make([]int16, 0, min(int64(math.Ceil(info.Seconds*float64(rate))), maxOut, maxPrealloc)+int64(rate/10))
	}
	for {
		var done bool
		if out, done, err = d.Next(out); err != nil {
			return Audio{}, containerErr(ctx, name, err)
		}
		n := int64(len(out))
		switch {
		case n > maxOut:
			return Audio{}, backends.InvalidParam("file", "audio: %s is longer than this model's limit of %g s", name, maxSeconds)
		case n > stated:
			return Audio{}, fileErr("%s decodes to more than the %.1f s its header states", name, info.Seconds)
		case d.Packets() > maxPackets:
			return Audio{}, fileErr("%s has more than the %d packets that %g s of audio may have", name, maxPackets, maxSeconds)
		}
		if done {
			break
		}
	}
	if len(out) == 0 {
		return Audio{}, fileErr("%s holds no samples", name)
	}
	// A file that ends well before the duration its header states was cut
	// short (an upload that broke off): refused rather than half heard.
	// Only when the duration is the audio's own: a video's may run longer.
	own := info.TrackSeconds || info.Streams == 1
	if got := float64(len(out)) / float64(rate); own && info.Seconds > 0 && got < info.Seconds*(1-statedSlackFraction)-statedSlackSeconds {
		return Audio{}, fileErr("%s is truncated: it decodes to %.1f s of the %.1f s its header states", name, got, info.Seconds)
	}
	return Audio{Rate: rate, Samples: out}, nil
}

func allowed(c av.Container, codec string) bool {
	for _, k := range containerCodecs[c] {
		if k == codec {
			return true
		}
	}
	return false
}

// fileErr is a 400 naming the field file.
func fileErr(format string, args ...any) error {
	return backends.InvalidParam("file", "audio: %s", fmt.Sprintf(format, args...))
}

// containerErr classifies a failure of backends/audio/av: the context's
// end, a missing library (the format cannot be read on this server), or
// a file that is damaged, has no audio track or goes beyond the bounds.
func containerErr(ctx context.Context, name string, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("audio: decoding stopped: %w", err)
	case errors.Is(err, av.ErrUnavailable):
		return fileErr("%s cannot be decoded on this server (%v): send WAV, FLAC, Ogg or MP3", name, err)
	case errors.Is(err, av.ErrNoAudio):
		return fileErr("%s: the file has no audio track", name)
	case errors.Is(err, av.ErrBounds):
		ch, r := 0, 0
		var b *av.BoundsError
		if errors.As(err, &b) {
			ch, r = b.Channels, b.Rate
		}
		if e := checkUpload(name+"'s decoded audio", ch, r); e != nil {
			return e
		}
		return fileErr("%s decodes beyond the upload bounds: %v", name, err)
	case errors.Is(err, av.ErrDamaged), errors.Is(err, av.ErrCodec):
		return fileErr("%s could not be decoded: %v", name, err)
	}
	return fmt.Errorf("audio: decoding %s: %w", name, err)
}

// aacRates are the rates AAC output is written at (the MPEG-4 sampling
// frequencies up to 48 kHz).
var aacRates = []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}

// AACContentType is the Content-Type of aac speech: AAC-LC in ADTS frames,
// as OpenAI's response_format aac answers.
const AACContentType = "audio/aac"

// aacBitrate is the AAC bitrate of mono speech (FFmpeg's native encoder).
const aacBitrate = 64000

// encodeAAC writes mono PCM16 speech as AAC-LC in ADTS with FFmpeg's
// native aac encoder (backends/audio/av), into memory bounded by the size
// of the PCM, stopping when ctx ends (audio.speech-format).
func encodeAAC(ctx context.Context, rate int, samples []int16) ([]byte, string, int, error) {
	if to := codecRate(aacRates, rate); to != rate {
		var err error
		if samples, err = ResampleContext(ctx, samples, rate, to); err != nil {
			return nil, "", 0, err
		}
		rate = to
	}
	b, err := av.Encode(ctx, av.EncodeOptions{Muxer: "adts", Encoder: "aac", Rate: rate, Bitrate: aacBitrate, Limit: 4*int64(len(samples)) + 1<<20}, samples)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", 0, fmt.Errorf("audio: encoding aac stopped: %w", ctx.Err())
		}
		return nil, "", 0, fmt.Errorf("audio: encoding aac: %w", err)
	}
	return b, AACContentType, rate, nil
}
