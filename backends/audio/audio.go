// Package audio owns the audio formats the speech engines exchange with
// clients: WAV parsing (PCM 8/16/24/32-bit and 32-bit float, any rate and
// channel count, downmixed to mono PCM16), raw little-endian PCM16 at a
// declared rate, FLAC, Ogg and MP3 through libsndfile (codec.go), WebM,
// MP4/M4A and ADTS through FFmpeg's libraries (container.go, backends/audio/av),
// WAV writing (whole files and streaming headers), compressed speech
// (mp3, opus, flac, aac) and a deterministic band-limited resampler to the
// engine's rate.
//
// Engines read request audio with DecodeInput, which bounds the work before
// doing it (CONTRACT.md "Audio input and output"): the duration the header
// states is checked against the engine's limit before any sample is
// decoded, samples are decoded and resampled in chunks under the request's
// context, and unrecognised formats are refused. The resampler costs time
// linear in its input (or output, when upsampling) for every pair of rates
// in MinRate..MaxRate and streams (Resampler).
//
// Every error about unreadable input wraps backends.ErrInvalid, so the HTTP
// layer answers 400 invalid_request_error.
//
// Threading rule: all functions are pure and safe for concurrent use.
package audio

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-dev/sluice/backends"
)

// Limits on accepted audio, so a hostile header cannot ask for absurd work.
const (
	MinRate     = 1000
	MaxRate     = 384000
	MaxChannels = 32
)

// Upload bounds (CONTRACT.md E2): decoding an upload costs in proportion
// to its frames times its channels, and a compressed file of silence
// states hours of them in little space (an 8-channel 384 kHz FLAC cost
// about 35 CPU-s per MB), so its channels and rate are refused from the
// header, before decoding, naming the field (file): at most
// MaxUploadChannels channels, MaxUploadRate samples per second per
// channel, and MaxUploadSampleRate samples per second over all channels
// (e.g. 96 kHz stereo, 48 kHz x 4, 24 kHz x 8). Speech needs 16 kHz mono.
const (
	MaxUploadChannels   = 8
	MaxUploadRate       = 192000
	MaxUploadSampleRate = 192000
)

// checkUpload refuses an upload's channels and rate beyond the upload
// bounds, naming the field file.
func checkUpload(what string, channels, rate int) error {
	if channels < 1 || channels > MaxUploadChannels || rate < MinRate || rate > MaxUploadRate || channels*rate > MaxUploadSampleRate {
		return backends.InvalidParam("file", "audio: %s has %d channel(s) at %d Hz; uploads are limited to %d channels, %d..%d Hz and %d samples per second over all channels",
			what, channels, rate, MaxUploadChannels, MinRate, MaxUploadRate, MaxUploadSampleRate)
	}
	return nil
}

// Audio is mono PCM16 audio at Rate samples per second.
type Audio struct {
	Rate    int
	Samples []int16
}

// Seconds returns the duration of a.
func (a Audio) Seconds() float64 {
	if a.Rate <= 0 {
		return 0
	}
	return float64(len(a.Samples)) / float64(a.Rate)
}

// To returns a resampled to rate (a itself when the rate already matches).
func (a Audio) To(rate int) Audio {
	if rate == a.Rate {
		return a
	}
	return Audio{Rate: rate, Samples: Resample(a.Samples, a.Rate, rate)}
}

// Decode reads an in-memory payload at its own rate: a WAV file, or raw
// little-endian mono PCM16 at rawRate when rawRate is declared (non-zero);
// anything else is refused. Errors wrap backends.ErrInvalid.
func Decode(data []byte, rawRate int) (Audio, error) {
	return decodeAll(data, rawRate)
}

// PCM16 converts little-endian 16-bit samples to int16s. An odd length is
// invalid.
func PCM16(b []byte) ([]int16, error) {
	if len(b)%2 != 0 {
		return nil, backends.Invalidf("audio: raw PCM16 has an odd byte count (%d)", len(b))
	}
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out, nil
}

// PCM16Bytes converts samples to little-endian bytes.
func PCM16Bytes(s []int16) []byte {
	out := make([]byte, 2*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
	}
	return out
}

// Float32 converts samples to floats in [-1, 1) (v/32768).
func Float32(s []int16) []float32 {
	out := make([]float32, len(s))
	for i, v := range s {
		out[i] = float32(v) / 32768
	}
	return out
}

func checkRate(rate int) error {
	if rate < MinRate || rate > MaxRate {
		return backends.Invalidf("audio: sample rate %d outside %d..%d", rate, MinRate, MaxRate)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return backends.Invalidf("audio: %s", fmt.Sprintf(format, args...))
}
