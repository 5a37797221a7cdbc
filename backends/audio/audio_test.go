package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

func sine(rate int, freq, seconds, amp float64) []int16 {
	n := int(float64(rate) * seconds)
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return s
}

func TestWAVRoundTrip(t *testing.T) {
	in := sine(22050, 440, 0.1, 12000)
	a, err := ParseWAV(WAV(22050, in))
	if err != nil {
		t.Fatal(err)
	}
	if a.Rate != 22050 || !equal(a.Samples, in) {
		t.Fatalf("round trip changed audio: rate %d, %d samples", a.Rate, len(a.Samples))
	}
}

func TestStreamHeaderParses(t *testing.T) {
	in := sine(16000, 300, 0.05, 8000)
	b := append(StreamHeader(16000), PCM16Bytes(in)...)
	a, err := ParseWAV(b)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(a.Samples, in) {
		t.Fatal("streamed WAV samples differ")
	}
}

// wavOf builds a WAV with an arbitrary format for the decoder tests.
func wavOf(format, channels, rate, bits int, data []byte) []byte {
	var b bytes.Buffer
	frame := channels * bits / 8
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+len(data)))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(format), uint16(channels), uint32(rate), uint32(rate * frame), uint16(frame), uint16(bits)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("LIST")
	_ = binary.Write(&b, binary.LittleEndian, uint32(3))
	b.WriteString("abc\x00") // odd chunk with its pad byte
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

func TestParseFormats(t *testing.T) {
	cases := []struct {
		name   string
		format int
		chans  int
		bits   int
		data   []byte
		want   []int16
	}{
		{"pcm8", formatPCM, 1, 8, []byte{128, 255, 0}, []int16{0, 32512, -32768}},
		{"pcm16 stereo", formatPCM, 2, 16, PCM16Bytes([]int16{100, 300, -50, -150}), []int16{200, -100}},
		{"pcm24", formatPCM, 1, 24, []byte{0x00, 0x01, 0x00, 0x00, 0x00, 0x80}, []int16{1, -32768}},
		{"pcm32", formatPCM, 1, 32, []byte{0, 0, 0x10, 0, 0, 0, 0, 0x80}, []int16{16, -32768}},
		{"float32", formatFloat, 1, 32, f32(0.5, -1, 2), []int16{16384, -32768, 32767}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ParseWAV(wavOf(c.format, c.chans, 8000, c.bits, c.data))
			if err != nil {
				t.Fatal(err)
			}
			if !equal(a.Samples, c.want) {
				t.Fatalf("got %v want %v", a.Samples, c.want)
			}
		})
	}
}

func f32(vs ...float32) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		_ = binary.Write(&b, binary.LittleEndian, math.Float32bits(v))
	}
	return b.Bytes()
}

func TestUnreadableAudioIsInvalid(t *testing.T) {
	good := WAV(16000, []int16{1, 2, 3})
	cases := map[string][]byte{
		"empty":         nil,
		"garbage":       []byte("this is not audio at all"),
		"truncated":     good[:30],
		"no data":       good[:36],
		"zero rate":     wavOf(formatPCM, 1, 0, 16, []byte{0, 0}),
		"huge rate":     wavOf(formatPCM, 1, 10_000_000, 16, []byte{0, 0}),
		"no channels":   wavOf(formatPCM, 0, 16000, 16, []byte{0, 0}),
		"12-bit":        wavOf(formatPCM, 1, 16000, 12, []byte{0, 0}),
		"mu-law":        wavOf(7, 1, 16000, 8, []byte{0}),
		"float64":       wavOf(formatFloat, 1, 16000, 64, make([]byte, 8)),
		"chunk overrun": append(append([]byte(nil), good[:12]...), []byte("fmt \xff\xff\x00\x00")...),
	}
	for name, b := range cases {
		if _, err := ParseWAV(b); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalid", name, err)
		}
	}
	if _, err := Decode([]byte{1, 2, 3}, 16000); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("odd raw PCM: got %v", err)
	}
	if _, err := Decode([]byte{1, 2}, 0); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("raw PCM without a rate: got %v", err)
	}
}

func TestDecodeRaw(t *testing.T) {
	a, err := Decode(PCM16Bytes([]int16{5, -5}), 16000)
	if err != nil || a.Rate != 16000 || !equal(a.Samples, []int16{5, -5}) {
		t.Fatalf("raw decode: %+v %v", a, err)
	}
}

func TestResampleKeepsToneAndLength(t *testing.T) {
	for _, c := range []struct{ from, to int }{{44100, 16000}, {48000, 16000}, {8000, 16000}, {22050, 16000}, {16000, 24000}, {16001, 16000}} {
		in := sine(c.from, 440, 1, 10000)
		out := Resample(in, c.from, c.to)
		wantLen := (len(in)*c.to + c.from - 1) / c.from
		if len(out) != wantLen {
			t.Errorf("%d->%d: %d samples, want %d", c.from, c.to, len(out), wantLen)
		}
		// Compare against the ideal tone away from the edges.
		var errSum, sigSum float64
		for i := c.to / 10; i < len(out)-c.to/10; i++ {
			ideal := 10000 * math.Sin(2*math.Pi*440*float64(i)/float64(c.to))
			errSum += (float64(out[i]) - ideal) * (float64(out[i]) - ideal)
			sigSum += ideal * ideal
		}
		if snr := 10 * math.Log10(sigSum/errSum); snr < 40 {
			t.Errorf("%d->%d: SNR %.1f dB, want >= 40", c.from, c.to, snr)
		}
	}
}

func TestResampleRemovesAliases(t *testing.T) {
	// 7 kHz is above the 16 kHz Nyquist frequency of the target: it must be
	// filtered out, not folded into 1 kHz.
	out := Resample(sine(48000, 11000, 1, 10000), 48000, 16000)
	var rms float64
	for _, v := range out[1600 : len(out)-1600] {
		rms += float64(v) * float64(v)
	}
	rms = math.Sqrt(rms / float64(len(out)-3200))
	if rms > 100 {
		t.Fatalf("alias energy rms %.0f, want < 100", rms)
	}
}

func TestResampleDeterministic(t *testing.T) {
	in := sine(44100, 1000, 0.3, 9000)
	a, b := Resample(in, 44100, 16000), Resample(in, 44100, 16000)
	if !equal(a, b) {
		t.Fatal("resampling is not deterministic")
	}
	if got := Resample(in, 16000, 16000); !equal(got, in) {
		t.Fatal("same-rate resample changed samples")
	}
}

func FuzzParseWAV(f *testing.F) {
	f.Add(WAV(16000, []int16{1, -1, 300}))
	f.Add(wavOf(formatFloat, 2, 8000, 32, f32(0.1, 0.2)))
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseWAV(b)
		if err != nil && !errors.Is(err, backends.ErrInvalid) {
			t.Fatalf("error does not wrap ErrInvalid: %v", err)
		}
		if err == nil && (a.Rate < MinRate || a.Rate > MaxRate) {
			t.Fatalf("accepted rate %d", a.Rate)
		}
	})
}

func equal(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
