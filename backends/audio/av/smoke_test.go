package av

import (
	"bytes"
	"context"
	"math"
	"testing"
)

func TestSmoke(t *testing.T) {
	pcm := make([]int16, 48000*2)
	for i := range pcm {
		pcm[i] = int16(8000 * math.Sin(2*math.Pi*300*float64(i)/48000))
	}
	for _, o := range []EncodeOptions{{Muxer: "webm", Encoder: "libopus", Rate: 48000}, {Muxer: "ipod", Encoder: "aac", Rate: 48000}, {Muxer: "adts", Encoder: "aac", Rate: 24000}, {Muxer: "webm", Encoder: "libopus", Rate: 48000, Streamable: true}, {Muxer: "webm", Encoder: "libvorbis", Rate: 48000}} {
		b, err := Encode(context.Background(), EncodeOptions{Muxer: o.Muxer, Encoder: o.Encoder, Rate: o.Rate, Limit: 1 << 24, Streamable: o.Streamable}, pcm)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s/%s: %d bytes % x", o.Muxer, o.Encoder, len(b), b[:12])
		c := WebM
		if o.Muxer != "webm" {
			c = MP4
		}
		if o.Muxer == "adts" {
			continue
		}
		d, err := Open(context.Background(), bytes.NewReader(b), int64(len(b)), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("info %+v", d.Info())
		if err := d.Start(16000, Bounds{8, 192000, 192000}); err != nil {
			t.Fatal(err)
		}
		var out []int16
		for {
			var done bool
			out, done, err = d.Next(out)
			if err != nil {
				t.Fatal(err)
			}
			if done {
				break
			}
		}
		t.Logf("decoded %d samples, %d packets", len(out), d.Packets())
		d.Close()
	}
}
