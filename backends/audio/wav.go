package audio

import (
	"encoding/binary"
	"math"
)

// WAV format tags.
const (
	formatPCM        = 1
	formatFloat      = 3
	formatExtensible = 0xFFFE
)

// IsWAV reports whether b starts with a RIFF/WAVE header.
func IsWAV(b []byte) bool {
	return len(b) >= 12 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WAVE"
}

// ParseWAV decodes a WAV file: integer PCM of 8, 16, 24 or 32 bits or
// 32-bit float, any rate in MinRate..MaxRate and up to MaxChannels channels,
// averaged to mono PCM16, at the file's own rate and without a duration
// limit (for payloads already in memory, such as engine outputs; requests
// go through DecodeInput). Errors wrap backends.ErrInvalid.
func ParseWAV(b []byte) (Audio, error) {
	if !IsWAV(b) {
		return Audio{}, invalid("not a RIFF/WAVE file")
	}
	return decodeAll(b, 0)
}

// sample returns one sample scaled to PCM16 units.
func sample(b []byte, format, bits int) float64 {
	switch {
	case format == formatFloat:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))) * 32768
	case bits == 8:
		return float64(int(b[0])-128) * 256
	case bits == 16:
		return float64(int16(binary.LittleEndian.Uint16(b)))
	case bits == 24:
		v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
		return float64(v) / 256
	default:
		return float64(int32(binary.LittleEndian.Uint32(b))) / 65536
	}
}

func toPCM16(v float64) int16 {
	v = math.Round(v)
	switch {
	case math.IsNaN(v):
		return 0
	case v > math.MaxInt16:
		return math.MaxInt16
	case v < math.MinInt16:
		return math.MinInt16
	}
	return int16(v)
}

// WAV returns a complete mono PCM16 WAV file of samples at rate.
func WAV(rate int, samples []int16) []byte {
	out := header(rate, uint32(2*len(samples)))
	return append(out, PCM16Bytes(samples)...)
}

// WAVHeader returns the header of a mono PCM16 WAV file of dataBytes bytes
// of samples at rate: WAV(rate, s) is WAVHeader(rate, 2*len(s)) followed by
// PCM16Bytes(s).
func WAVHeader(rate, dataBytes int) []byte {
	return header(rate, uint32(dataBytes))
}

// StreamHeader returns a mono PCM16 WAV header whose sizes say "unknown"
// (0xFFFFFFFF), for a response streamed before its length is known;
// ParseWAV reads such files.
func StreamHeader(rate int) []byte {
	return header(rate, 0xFFFFFFFF-36)
}

func header(rate int, dataLen uint32) []byte {
	h := make([]byte, 44)
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], 36+dataLen)
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], formatPCM)
	binary.LittleEndian.PutUint16(h[22:], 1)
	binary.LittleEndian.PutUint32(h[24:], uint32(rate))
	binary.LittleEndian.PutUint32(h[28:], uint32(rate*2))
	binary.LittleEndian.PutUint16(h[32:], 2)
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], dataLen)
	return h
}
