package diarize

import (
	"context"
	"math"

	"gonum.org/v1/gonum/dsp/fourier"
)

// Frame analysis at 16 kHz: 25 ms Hamming frames every 10 ms, a 512-point
// FFT, 40 mel bands from 60 Hz to 7.6 kHz, and cepstra c1..c19 (c0, the
// frame's loudness, is dropped: a speaker's gain is not its voice).
const (
	rate      = 16000
	frameLen  = 400
	frameHop  = 160
	fftSize   = 512
	melBands  = 40
	numCeps   = 19
	deltaSpan = 2           // frames each side of the delta regression
	pitchCol  = 2 * numCeps // log F0 (addPitch)
	featDim   = 2*numCeps + 1
	framesSec = rate / frameHop // frames per second
)

// mfcc computes per-frame cepstra and their deltas.
type mfcc struct {
	fft    *fourier.FFT
	window []float64
	mel    [][]float64 // melBands filters over fftSize/2+1 bins
	dct    [][]float64 // numCeps x melBands
	buf    []float64
	coef   []complex128
}

func newMFCC() *mfcc {
	m := &mfcc{fft: fourier.NewFFT(fftSize), buf: make([]float64, fftSize), coef: make([]complex128, fftSize/2+1)}
	m.window = make([]float64, frameLen)
	for i := range m.window {
		m.window[i] = 0.54 - 0.46*math.Cos(2*math.Pi*float64(i)/float64(frameLen-1))
	}
	toMel := func(f float64) float64 { return 1127 * math.Log(1+f/700) }
	fromMel := func(m float64) float64 { return 700 * (math.Exp(m/1127) - 1) }
	lo, hi := toMel(60), toMel(7600)
	edges := make([]float64, melBands+2)
	for i := range edges {
		edges[i] = fromMel(lo + (hi-lo)*float64(i)/float64(melBands+1))
	}
	bins := fftSize/2 + 1
	m.mel = make([][]float64, melBands)
	for b := range m.mel {
		m.mel[b] = make([]float64, bins)
		l, c, r := edges[b], edges[b+1], edges[b+2]
		for k := range bins {
			f := float64(k) * rate / fftSize
			switch {
			case f > l && f <= c:
				m.mel[b][k] = (f - l) / (c - l)
			case f > c && f < r:
				m.mel[b][k] = (r - f) / (r - c)
			}
		}
	}
	m.dct = make([][]float64, numCeps)
	for c := range m.dct {
		m.dct[c] = make([]float64, melBands)
		for b := range melBands {
			m.dct[c][b] = math.Cos(math.Pi * float64(c+1) * (float64(b) + 0.5) / melBands)
		}
	}
	return m
}

// frames returns featDim features (cepstra then deltas) for every frame
// whose start lies in samples: frame i starts at i*frameHop.
func (m *mfcc) frames(ctx context.Context, samples []int16) ([][]float64, error) {
	n := len(samples) / frameHop
	ceps := make([][]float64, n)
	logmel := make([]float64, melBands)
	for i := range n {
		if i%1000 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		off := i * frameHop
		prev := 0.0
		if off > 0 {
			prev = float64(samples[off-1])
		}
		for k := range m.buf {
			m.buf[k] = 0
		}
		for k := 0; k < frameLen && off+k < len(samples); k++ {
			x := float64(samples[off+k])
			m.buf[k] = (x - 0.97*prev) * m.window[k] / 32768
			prev = x
		}
		m.fft.Coefficients(m.coef, m.buf)
		for b, filt := range m.mel {
			e := 0.0
			for k, w := range filt {
				if w != 0 {
					c := m.coef[k]
					e += w * (real(c)*real(c) + imag(c)*imag(c))
				}
			}
			logmel[b] = math.Log(e + 1e-10)
		}
		row := make([]float64, featDim)
		for c, d := range m.dct {
			s := 0.0
			for b, v := range logmel {
				s += d[b] * v
			}
			row[c] = s
		}
		ceps[i] = row
	}
	// Deltas: the regression slope over ±deltaSpan frames (edges repeated).
	norm := 0.0
	for d := 1; d <= deltaSpan; d++ {
		norm += 2 * float64(d*d)
	}
	for i := range ceps {
		for c := range numCeps {
			s := 0.0
			for d := 1; d <= deltaSpan; d++ {
				s += float64(d) * (ceps[min(n-1, i+d)][c] - ceps[max(0, i-d)][c])
			}
			ceps[i][numCeps+c] = s / norm
		}
	}
	return ceps, nil
}

// standardize makes every dimension of the selected rows zero-mean and
// unit-variance over those rows (cepstral mean and variance normalisation
// over the recording's speech), in place.
func standardize(rows [][]float64, sel []int) {
	if len(sel) == 0 {
		return
	}
	dim := len(rows[sel[0]])
	mean, sq := make([]float64, dim), make([]float64, dim)
	for _, i := range sel {
		for d, v := range rows[i] {
			mean[d] += v
			sq[d] += v * v
		}
	}
	n := float64(len(sel))
	for d := range dim {
		mean[d] /= n
		sd := math.Sqrt(max(sq[d]/n-mean[d]*mean[d], 1e-12))
		sq[d] = sd
	}
	for _, i := range sel {
		for d := range rows[i] {
			rows[i][d] = (rows[i][d] - mean[d]) / sq[d]
		}
	}
}

// embed returns the statistics vector of the frames idx: per-dimension
// mean and standard deviation.
func embed(frames [][]float64, idx []int) []float64 {
	out := make([]float64, 2*featDim)
	n := float64(len(idx))
	for _, i := range idx {
		for d, v := range frames[i] {
			out[d] += v
			out[featDim+d] += v * v
		}
	}
	for d := range featDim {
		mu := out[d] / n
		out[d] = mu
		out[featDim+d] = math.Sqrt(max(out[featDim+d]/n-mu*mu, 0))
	}
	return out
}
