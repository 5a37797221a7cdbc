package audio

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

// boundsWAV is a PCM16 WAV of frames of silence with the given channels and
// rate.
func boundsWAV(channels, rate, frames int) []byte {
	data := frames * channels * 2
	b := make([]byte, 44+data)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+data))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], uint16(channels))
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(rate*channels*2))
	binary.LittleEndian.PutUint16(b[32:], uint16(channels*2))
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(data))
	return b
}

// TestUploadBoundsBeforeDecoding: an upload's channels and rate are
// refused from its header, before any sample is decoded, with an error
// naming the field file (CONTRACT.md E2); within the bounds it decodes.
// On main an 8-channel 384 kHz upload was decoded (35 CPU-s per MB of
// FLAC silence).
func TestUploadBoundsBeforeDecoding(t *testing.T) {
	ctx := context.Background()
	want := Want{Rate: 16000, MaxSeconds: 60}
	for _, c := range []struct {
		channels, rate int
		ok             bool
	}{
		{1, 16000, true}, {2, 96000, true}, {8, 24000, true}, {1, 192000, true},
		{8, 384000, false}, {2, 192000, false}, {1, 384000, false}, {16, 16000, false}, {8, 32000, false},
	} {
		_, err := DecodeInput(ctx, backends.Request{Data: boundsWAV(c.channels, c.rate, c.rate/100)}, want)
		switch {
		case c.ok && err != nil:
			t.Errorf("%d ch at %d Hz refused: %v", c.channels, c.rate, err)
		case !c.ok && (!errors.Is(err, backends.ErrInvalid) || backends.ParamOf(err) != "file"):
			t.Errorf("%d ch at %d Hz: err %v (param %q), want ErrInvalid naming file", c.channels, c.rate, err, backends.ParamOf(err))
		}
	}
	raw := make([]byte, 3840)
	if _, err := DecodeInput(ctx, backends.Request{Data: raw}, Want{Rate: 16000, MaxSeconds: 60, RawRate: 384000}); backends.ParamOf(err) != "file" {
		t.Errorf("raw PCM at 384 kHz: %v", err)
	}
}
