package audio

import "math"

// The resampler as it was before bounded decoding, kept only as the baseline of
// BenchmarkResample (oldResample beside Resample in one run) and as the
// reference that exact-table pairs must still match sample for sample.
// When up exceeded maxPhases it allocated and recomputed the weights for
// every output sample.

const oldMaxPhases = 4096

func oldResample(samples []int16, from, to int) []int16 {
	if from == to || len(samples) == 0 {
		return append([]int16(nil), samples...)
	}
	g := gcd(from, to)
	up, down := to/g, from/g // output i sits at input position i*down/up
	outLen := int((int64(len(samples))*int64(up) + int64(down) - 1) / int64(down))
	cut := cutoffRatio * math.Min(1, float64(to)/float64(from)) // in input Nyquist units
	half := int(math.Ceil(kernelZeros / cut))                   // taps each side, in input samples
	var table [][]float64
	if up <= oldMaxPhases {
		table = make([][]float64, up)
		for p := range table {
			table[p] = oldWeights(float64(p)/float64(up), half, cut)
		}
	}
	out := make([]int16, outLen)
	for i := range out {
		num := int64(i) * int64(down)
		base := int(num / int64(up))
		phase := int(num % int64(up))
		var w []float64
		if table != nil {
			w = table[phase]
		} else {
			w = oldWeights(float64(phase)/float64(up), half, cut)
		}
		var acc float64
		for k, wk := range w {
			j := base - half + 1 + k
			if j >= 0 && j < len(samples) {
				acc += wk * float64(samples[j])
			}
		}
		out[i] = toPCM16(acc)
	}
	return out
}

// oldWeights is the old per-call weight computation: a fresh slice each
// time (its cost is what the baseline measures), the same taps as weights.
func oldWeights(frac float64, half int, cut float64) []float64 {
	w := make([]float64, 2*half)
	weights(w, frac, half, cut)
	return w
}
