package diarize

import (
	"context"
	"math"

	"gonum.org/v1/gonum/dsp/fourier"
)

// Pitch at 16 kHz: Boersma's autocorrelation method over a 40-ms Hann
// window centred on each 10-ms frame, lags for 60..400 Hz, through a
// 1024-point FFT (the window and the longest lag without wrapping).
const (
	pitchLen    = 640
	pitchFFT    = 1024
	pitchMinLag = rate / 400
	pitchMaxLag = rate / 60
	voicedPeak  = 0.5  // normalised autocorrelation peak of a voiced frame
	octaveCost  = 0.02 // per octave of lag above the shortest
)

// pitcher estimates per-frame log F0.
type pitcher struct {
	fft    *fourier.FFT
	window []float64
	wac    []float64 // the window's normalised autocorrelation per lag
	buf    []float64
	coef   []complex128
	ac     []float64
}

func newPitcher() *pitcher {
	p := &pitcher{fft: fourier.NewFFT(pitchFFT), buf: make([]float64, pitchFFT), coef: make([]complex128, pitchFFT/2+1), ac: make([]float64, pitchFFT)}
	p.window = make([]float64, pitchLen)
	for i := range p.window {
		p.window[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(pitchLen-1))
	}
	p.wac = make([]float64, pitchMaxLag+2)
	for lag := range p.wac {
		s := 0.0
		for i := 0; i+lag < pitchLen; i++ {
			s += p.window[i] * p.window[i+lag]
		}
		p.wac[lag] = s
	}
	for lag := len(p.wac) - 1; lag >= 0; lag-- {
		p.wac[lag] /= p.wac[0]
	}
	return p
}

// logF0 returns the log F0 of the frame centred on frame f's centre and
// the strength of its autocorrelation peak (0 when silent).
func (p *pitcher) logF0(samples []int16, f int) (float64, float64) {
	c := f*frameHop + frameLen/2
	a := c - pitchLen/2
	mean := 0.0
	for i := range pitchLen {
		if j := a + i; j >= 0 && j < len(samples) {
			mean += float64(samples[j])
		}
	}
	mean /= pitchLen
	for i := range p.buf {
		p.buf[i] = 0
	}
	for i := range pitchLen {
		if j := a + i; j >= 0 && j < len(samples) {
			p.buf[i] = (float64(samples[j]) - mean) * p.window[i]
		}
	}
	p.fft.Coefficients(p.coef, p.buf)
	for k, v := range p.coef {
		p.coef[k] = complex(real(v)*real(v)+imag(v)*imag(v), 0)
	}
	p.fft.Sequence(p.ac, p.coef)
	if p.ac[0] <= 1e-3 {
		return 0, 0
	}
	// The best local maximum, less Boersma's octave cost per octave
	// below the highest pitch: a periodic signal correlates as well at
	// twice its period, and the shorter lag should win.
	best, bestV, bestS := 0, 0.0, math.Inf(-1)
	r := func(lag int) float64 { return p.ac[lag] / p.ac[0] / p.wac[lag] }
	for lag := pitchMinLag; lag <= pitchMaxLag; lag++ {
		v := r(lag)
		if v >= r(lag-1) && v >= r(lag+1) {
			if s := v - octaveCost*math.Log2(float64(lag)/pitchMinLag); s > bestS {
				best, bestV, bestS = lag, v, s
			}
		}
	}
	if best == 0 {
		return 0, 0
	}
	// Parabolic interpolation of the peak.
	y0, y1, y2 := r(best-1), bestV, r(best+1)
	lag := float64(best)
	if d := y0 - 2*y1 + y2; d < 0 {
		lag += 0.5 * (y0 - y2) / d
	}
	return math.Log(rate / lag), bestV
}

// addPitch writes log F0 into column col of the speech frames of spans:
// voiced frames their own, the others the nearest voiced frame's of their
// span (the span's median when none is voiced, 0 when no frame of the
// recording is).
func addPitch(ctx context.Context, samples []int16, frames [][]float64, spans []span, col int) error {
	p := newPitcher()
	done := 0 // frames analysed: the context is checked every 1000
	for _, s := range spans {
		voiced := make([]bool, s.b-s.a)
		nv := 0
		for f := s.a; f < s.b; f++ {
			if done%1000 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			done++
			lf, v := p.logF0(samples, f)
			if v >= voicedPeak {
				frames[f][col], voiced[f-s.a] = lf, true
				nv++
			}
		}
		if nv == 0 {
			continue
		}
		// Unvoiced frames: the nearest voiced one's (left wins ties).
		next := make([]int, len(voiced)) // the first voiced index >= i, or -1
		n := -1
		for i := len(voiced) - 1; i >= 0; i-- {
			if voiced[i] {
				n = i
			}
			next[i] = n
		}
		last := -1
		for i := range voiced {
			switch {
			case voiced[i]:
				last = i
			case last < 0 || (next[i] >= 0 && next[i]-i < i-last):
				frames[s.a+i][col] = frames[s.a+next[i]][col]
			default:
				frames[s.a+i][col] = frames[s.a+last][col]
			}
		}
	}
	return nil
}
