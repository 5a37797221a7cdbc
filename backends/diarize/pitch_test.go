package diarize

import (
	"context"
	"math"
	"testing"
)

// harmonics is seconds of a tone at f0 with its first five harmonics
// (falling amplitudes), at 16 kHz.
func harmonics(f0, seconds float64) []int16 {
	out := make([]int16, int(seconds*rate))
	for i := range out {
		x := 0.0
		for h := 1; h <= 5; h++ {
			x += math.Sin(2*math.Pi*f0*float64(h)*float64(i)/rate) / float64(h)
		}
		out[i] = int16(6000 * x)
	}
	return out
}

// log F0 of voiced frames is the tone's within 2% across the range a
// voice has (a low man to a child), silence is unvoiced, and an unvoiced
// frame in a region takes its nearest voiced neighbour's value.
func TestPitch(t *testing.T) {
	p := newPitcher()
	for _, f0 := range []float64{70, 110, 180, 260, 380} {
		s := harmonics(f0, 0.5)
		for _, f := range []int{5, 20, 40} {
			lf, v := p.logF0(s, f)
			if v < voicedPeak || math.Abs(math.Exp(lf)/f0-1) > 0.02 {
				t.Errorf("%v Hz frame %d: F0 %.1f Hz, peak %.2f", f0, f, math.Exp(lf), v)
			}
		}
	}
	if _, v := p.logF0(make([]int16, 8000), 20); v != 0 {
		t.Errorf("silence: peak %v", v)
	}
	// A region: 0.3 s of 150 Hz, 0.2 s of silence, 0.3 s of 250 Hz.
	s := append(append(harmonics(150, 0.3), make([]int16, 3200)...), harmonics(250, 0.3)...)
	n := len(s) / frameHop
	frames := make([][]float64, n)
	for i := range frames {
		frames[i] = make([]float64, featDim)
	}
	if err := addPitch(context.Background(), s, frames, []span{{0, n}}, pitchCol); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f  int
		f0 float64
	}{{10, 150}, {32, 150}, {36, 150}, {44, 250}, {48, 250}, {70, 250}} {
		if got := math.Exp(frames[c.f][pitchCol]); math.Abs(got/c.f0-1) > 0.02 {
			t.Errorf("frame %d: %.1f Hz, want %v", c.f, got, c.f0)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := addPitch(ctx, s, frames, []span{{0, n}}, pitchCol); err == nil {
		t.Error("cancelled: no error")
	}
}

// The pitch pass's cost per second of speech, beside the cepstra's.
func BenchmarkPitch(b *testing.B) {
	s := harmonics(140, 10)
	n := len(s) / frameHop
	frames := make([][]float64, n)
	for i := range frames {
		frames[i] = make([]float64, featDim)
	}
	b.Run("pitch", func(b *testing.B) {
		for b.Loop() {
			if err := addPitch(context.Background(), s, frames, []span{{0, n}}, pitchCol); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mfcc", func(b *testing.B) {
		m := newMFCC()
		for b.Loop() {
			if _, err := m.frames(context.Background(), s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
