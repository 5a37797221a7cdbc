package audio

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio/av"
	"github.com/sluice-dev/sluice/backends/internal/sndfile"
)

// Compressed formats go through libsndfile (Debian libsndfile1, bound in
// backends/internal/sndfile): FLAC, Ogg Vorbis, Ogg Opus and MP3 uploads
// are recognised by their first bytes and decoded from the request's Blob
// through libsndfile's virtual I/O, with the same bounds as WAV: the
// duration the header states is checked against the limit before any
// sample is decoded, the decode loop itself stops at the limit (an MP3's
// length is an estimate), and the request's context is checked between
// chunks and on every read. Speech is encoded to MP3, Opus (Ogg) and FLAC
// the same way, into memory bounded by the size of the PCM.

// codecName names the compressed format b starts with, or "" when it is
// none that libsndfile decodes here.
func codecName(b []byte) string {
	has := func(s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }
	switch {
	case has("fLaC"):
		return "FLAC audio"
	case has("OggS"):
		return "Ogg audio"
	case has("ID3"), len(b) >= 2 && b[0] == 0xFF && b[1]&0xE0 == 0xE0:
		return "MP3 audio"
	}
	return ""
}

// decodeCodec decodes the compressed upload src (named name) to mono PCM16
// at rate (0: the file's own rate). maxSeconds > 0 bounds the duration,
// from the header before decoding and again while decoding.
func decodeCodec(ctx context.Context, src backends.Blob, name string, rate int, maxSeconds float64) (Audio, error) {
	r, err := sndfile.Open(ctx, src, src.Size())
	if err != nil {
		return Audio{}, codecErr(ctx, name, err)
	}
	defer r.Close()
	info := r.Info()
	if info.Channels > MaxChannels {
		return Audio{}, invalid("%s has %d channels (1..%d supported)", name, info.Channels, MaxChannels)
	}
	if err := checkRate(info.Rate); err != nil {
		return Audio{}, err
	}
	if err := checkUpload("the "+name, info.Channels, info.Rate); err != nil {
		return Audio{}, err
	}
	if rate == 0 {
		rate = info.Rate
	}
	maxFrames := int64(math.MaxInt64)
	known := info.Frames > 0 && info.Frames < sndfile.CountMax
	if maxSeconds > 0 {
		maxFrames = int64(math.Ceil(maxSeconds * float64(info.Rate)))
		// audio.duration-limit: refused from the header, before decoding.
		if known && info.Frames > maxFrames {
			return Audio{}, backends.InvalidParam("file", "audio: %.1f s of audio, longer than this model's limit of %g s", float64(info.Frames)/float64(info.Rate), maxSeconds)
		}
	}
	rs := NewResampler(info.Rate, rate)
	var out []int16
	if known {
		out = make([]int16, 0, rs.OutLen(min(info.Frames, maxFrames)))
	}
	var buf, mono []int16
	ch := info.Channels
	for total := int64(0); ; {
		if err := ctx.Err(); err != nil {
			return Audio{}, fmt.Errorf("audio: decoding stopped: %w", err)
		}
		if buf, err = r.Read(buf); err != nil {
			return Audio{}, codecErr(ctx, name, err)
		}
		n := len(buf) / ch
		if n == 0 {
			break
		}
		if total += int64(n); total > maxFrames {
			return Audio{}, backends.InvalidParam("file", "audio: %s is longer than this model's limit of %g s", name, maxSeconds)
		}
		if ch == 1 {
			mono = buf
		} else {
			mono = mono[:0]
			for i := range n {
				var sum int
				for _, v := range buf[i*ch : (i+1)*ch] {
					sum += int(v)
				}
				mono = append(mono, toPCM16(float64(sum)/float64(ch)))
			}
		}
		out = rs.Write(mono, out)
	}
	out = rs.Flush(out)
	if len(out) == 0 {
		return Audio{}, invalid("%s holds no samples", name)
	}
	return Audio{Rate: rate, Samples: out}, nil
}

// codecErr classifies a libsndfile failure: the context's end, a missing
// library (the format cannot be read on this server), or unreadable data.
func codecErr(ctx context.Context, name string, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("audio: decoding stopped: %w", err)
	case errors.Is(err, sndfile.ErrUnavailable):
		return invalid("%s cannot be decoded on this server (%v): send a WAV file", name, err)
	}
	return invalid("%s could not be decoded: %v", name, err)
}

// The speech output formats (SpeechParams.ResponseFormat, TTSRequest.Format).
const (
	// PCMRate is the rate of format "pcm" unless sample_rate asks for
	// another: OpenAI documents its pcm as 24 kHz s16le mono.
	PCMRate = 24000
	// SpeechFormats lists the formats, for error messages.
	SpeechFormats = "wav, mp3, opus, aac, flac or pcm"
)

// codec is how a compressed output format is written.
type codec struct {
	format      int   // libsndfile major | subtype
	rates       []int // the rates it can be written at (ascending); nil: any
	contentType string
}

var codecs = map[string]codec{
	"mp3":  {sndfile.FormatMPEG | sndfile.SubMP3, []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}, "audio/mpeg"},
	"opus": {sndfile.FormatOGG | sndfile.SubOpus, []int{8000, 12000, 16000, 24000, 48000}, "audio/ogg; codecs=opus"},
	"flac": {sndfile.FormatFLAC | sndfile.SubPCM16, nil, "audio/flac"},
}

// ValidFormat reports whether f names a speech output format ("" is wav).
func ValidFormat(f string) bool {
	_, ok := codecs[f]
	return ok || f == "" || f == "wav" || f == "pcm" || (f == "aac" && av.Load() == nil)
}

// codecRate returns the lowest rate of rates at or above rate (the highest
// when none is), or rate itself when any rate will do.
func codecRate(rates []int, rate int) int {
	for _, r := range rates {
		if r >= rate {
			return r
		}
	}
	if len(rates) == 0 {
		return rate
	}
	return rates[len(rates)-1]
}

// Encode writes mono PCM16 samples at rate as format ("mp3", "opus",
// "aac" or "flac"), resampling first when the codec cannot take rate
// (Opus: 8, 12, 16, 24 or 48 kHz; MP3 and AAC: the MPEG rates), and
// returns the bytes, their content type and the rate written. It stops
// when ctx ends.
func Encode(ctx context.Context, format string, rate int, samples []int16) ([]byte, string, int, error) {
	if format == "aac" {
		return encodeAAC(ctx, rate, samples)
	}
	c, ok := codecs[format]
	if !ok {
		return nil, "", 0, backends.Invalidf("audio: cannot encode %q (%s)", format, SpeechFormats)
	}
	if to := codecRate(c.rates, rate); to != rate {
		var err error
		if samples, err = ResampleContext(ctx, samples, rate, to); err != nil {
			return nil, "", 0, err
		}
		rate = to
	}
	// Every codec here writes less than PCM16 plus its headers.
	limit := 4*int64(len(samples)) + 1<<20
	b, err := sndfile.Encode(ctx, samples, rate, c.format, limit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", 0, fmt.Errorf("audio: encoding %s stopped: %w", format, ctx.Err())
		}
		return nil, "", 0, fmt.Errorf("audio: encoding %s: %w", format, err)
	}
	return b, c.contentType, rate, nil
}
