package audio

import (
	"context"
	"fmt"
	"math"
	"sync"
)

// Resampler parameters: a Hann-windowed sinc with kernelZeros zero
// crossings each side, cut off slightly below the lower Nyquist rate.
//
// Cost: the kernel spans 2*kernelZeros/cut input samples (cut is the cut-off
// in input Nyquist units, cutoffRatio*min(1, to/from)), so an output costs
// that many multiply-adds and the whole conversion about
// 2*kernelZeros/cutoffRatio (34) per input sample, or per output sample
// when upsampling, for every rate pair: downsampling 384 kHz to 1 kHz has a
// 13,000-tap kernel but computes one output per 384 inputs. The work is
// therefore linear in the larger of input and output, and no kernel-length
// cap is needed; what is bounded instead is the weight table (phaseBase).
const (
	kernelZeros = 16
	cutoffRatio = 0.94
	// phaseBase sets the resolution of the weight table: a rate pair whose
	// output positions fall on up distinct fractions of an input sample
	// uses the exact table when up <= phases, otherwise phases (+1)
	// quantized fractions with linear interpolation between neighbours.
	// phases is phaseBase*cut clamped to minPhases..phaseBase: the
	// kernel's highest frequency is cut/2 cycles per input sample, so the
	// interpolation error, about (pi*cut/phases)^2/8 relative, stays below
	// -100 dB at any cut, and the table holds about
	// phaseBase*2*kernelZeros/cutoffRatio weights (280 KB) for every pair.
	phaseBase = 1024
	minPhases = 16
	// maxKernels bounds the cache of weight tables (one per rate pair).
	maxKernels = 16
)

// kernel is the immutable polyphase filter of one rate pair, shared by
// every Resampler of that pair.
type kernel struct {
	up, down int64 // output i sits at input position i*down/up
	half     int   // taps each side of the output position
	taps     int   // 2*half
	phases   int   // rows of table (exact: up; quantized: phases+1 rows)
	exact    bool
	table    []float64 // row p (taps weights) at table[p*taps:]
}

var kernels struct {
	sync.Mutex
	m     map[[2]int]*kernel
	order [][2]int // insertion order, for eviction
}

// kernelFor returns the (cached) kernel converting from to to.
func kernelFor(from, to int) *kernel {
	key := [2]int{from, to}
	kernels.Lock()
	k := kernels.m[key]
	kernels.Unlock()
	if k != nil {
		return k
	}
	k = newKernel(from, to)
	kernels.Lock()
	defer kernels.Unlock()
	if old := kernels.m[key]; old != nil {
		return old
	}
	if kernels.m == nil {
		kernels.m = make(map[[2]int]*kernel)
	}
	if len(kernels.order) >= maxKernels {
		delete(kernels.m, kernels.order[0])
		kernels.order = append(kernels.order[:0], kernels.order[1:]...)
	}
	kernels.m[key] = k
	kernels.order = append(kernels.order, key)
	return k
}

func newKernel(from, to int) *kernel {
	g := gcd(from, to)
	k := &kernel{up: int64(to / g), down: int64(from / g)}
	cut := cutoffRatio * math.Min(1, float64(to)/float64(from)) // in input Nyquist units
	k.half = int(math.Ceil(kernelZeros / cut))
	k.taps = 2 * k.half
	q := min(phaseBase, max(minPhases, int(math.Ceil(phaseBase*cut))))
	if k.up <= int64(q) {
		k.exact, k.phases = true, int(k.up)
		k.table = make([]float64, k.phases*k.taps)
		for p := range k.phases {
			weights(k.table[p*k.taps:(p+1)*k.taps], float64(p)/float64(k.up), k.half, cut)
		}
		return k
	}
	k.phases = q
	k.table = make([]float64, (q+1)*k.taps)
	for p := range q + 1 {
		weights(k.table[p*k.taps:(p+1)*k.taps], float64(p)/float64(q), k.half, cut)
	}
	return k
}

// at returns output i's value from the window x of k.taps input samples
// starting at input index base-half+1, where base and phase are i's
// position (i*down = base*up + phase).
func (k *kernel) at(x []float64, phase int64) float64 {
	if k.exact {
		return dot(k.table[int(phase)*k.taps:int(phase+1)*k.taps], x)
	}
	pos := float64(phase) / float64(k.up) * float64(k.phases)
	p := int(pos)
	if p >= k.phases {
		p = k.phases - 1
	}
	t := pos - float64(p)
	a, b := dot2(k.table[p*k.taps:(p+1)*k.taps], k.table[(p+1)*k.taps:(p+2)*k.taps], x)
	return a + t*(b-a)
}

// dot2 returns the dot products of w0 and w1 (of equal length) with x in
// one pass over x.
func dot2(w0, w1, x []float64) (float64, float64) {
	x = x[:len(w0)]
	w1 = w1[:len(w0)]
	var a, b float64
	for i, v := range w0 {
		a += v * x[i]
		b += w1[i] * x[i]
	}
	return a, b
}

func dot(w, x []float64) float64 {
	x = x[:len(w)]
	var acc float64
	for i, v := range w {
		acc += v * x[i]
	}
	return acc
}

// Resampler converts a stream of samples from one rate to another, chunk
// by chunk, with the same windowed-sinc filter and output as Resample on
// the whole stream. Its memory is the kernel's window plus windowPiece
// samples, whatever the chunk sizes; after its first Write it allocates
// nothing. Not safe
// for concurrent use.
type Resampler struct {
	k     *kernel
	same  bool
	buf   []float64 // input samples from absolute index start on
	pad   []float64 // a window at the edges of the input
	start int64
	in    int64 // input samples written
	next  int64 // next output index
}

// NewResampler returns a Resampler from rate from to rate to (both
// positive).
func NewResampler(from, to int) *Resampler {
	if from == to {
		return &Resampler{same: true}
	}
	return &Resampler{k: kernelFor(from, to)}
}

// OutLen returns the number of samples n input samples resample to:
// ceil(n*to/from).
func (r *Resampler) OutLen(n int64) int64 {
	if r.same {
		return n
	}
	return (n*r.k.up + r.k.down - 1) / r.k.down
}

// Write feeds in and appends to out every output sample whose window is
// now complete, returning the extended slice.
func (r *Resampler) Write(in []int16, out []int16) []int16 {
	if r.same {
		r.in += int64(len(in))
		return append(out, in...)
	}
	// In pieces, so the window holds at most the kernel plus one piece
	// whatever the caller's chunk size.
	for len(in) > 0 {
		n := min(len(in), windowPiece)
		out = r.write(in[:n], out)
		in = in[n:]
	}
	return out
}

// windowPiece is the most input samples the window takes at a time.
const windowPiece = 4096

func (r *Resampler) write(in []int16, out []int16) []int16 {
	// Drop the samples no pending output needs any more.
	if first := r.firstTap(r.next); first > r.start {
		drop := min(first-r.start, int64(len(r.buf)))
		n := copy(r.buf, r.buf[drop:])
		r.buf = r.buf[:n]
		r.start += drop
	}
	if r.buf == nil {
		r.buf = make([]float64, 0, r.k.taps+windowPiece)
	}
	// buf always ends at r.in: consecutive outputs are from/to input
	// samples apart, less than the kernel, so no sample is skipped.
	for _, v := range in {
		r.buf = append(r.buf, float64(v))
	}
	r.in += int64(len(in))
	return r.produce(out, r.in)
}

// Flush appends the remaining outputs, treating the input as zero past its
// end, so the total is OutLen(samples written). The Resampler is then
// done.
func (r *Resampler) Flush(out []int16) []int16 {
	if r.same {
		return out
	}
	return r.produce(out, -1)
}

// firstTap is the first input index output i weighs.
func (r *Resampler) firstTap(i int64) int64 {
	return i*r.k.down/r.k.up - int64(r.k.half) + 1
}

// produce appends outputs while their last tap is below avail (-1: flush,
// every output up to OutLen).
func (r *Resampler) produce(out []int16, avail int64) []int16 {
	k := r.k
	total := r.OutLen(r.in)
	for ; r.next < total; r.next++ {
		num := r.next * k.down
		base := num / k.up
		lo := base - int64(k.half) + 1
		hi := lo + int64(k.taps) // exclusive
		if avail >= 0 && hi > avail {
			break
		}
		var x []float64
		if lo >= r.start && hi <= r.start+int64(len(r.buf)) {
			x = r.buf[lo-r.start : hi-r.start]
		} else {
			// Edges only (the first and last half-kernel): zeros outside
			// the input.
			if r.pad == nil {
				r.pad = make([]float64, k.taps)
			}
			for j := range r.pad {
				idx := lo + int64(j)
				if idx >= r.start && idx < r.start+int64(len(r.buf)) {
					r.pad[j] = r.buf[idx-r.start]
				} else {
					r.pad[j] = 0
				}
			}
			x = r.pad
		}
		out = append(out, toPCM16(k.at(x, num%k.up)))
	}
	return out
}

// Resample converts samples from rate from to rate to with a windowed-sinc
// low-pass interpolator (a Resampler over the whole buffer). It is
// deterministic (the same input gives the same bytes on every call) and
// exact in its position arithmetic (integers, no drift). Rates must be
// positive. The result has ceil(len*to/from) samples.
func Resample(samples []int16, from, to int) []int16 {
	if from == to || len(samples) == 0 {
		return append([]int16(nil), samples...)
	}
	r := NewResampler(from, to)
	out := make([]int16, 0, r.OutLen(int64(len(samples))))
	return r.Flush(r.Write(samples, out))
}

// ResampleContext is Resample in pieces of decodeChunk samples, checking
// ctx between them: for long outputs (a whole synthesis) whose caller may
// leave. It returns an error wrapping ctx's when ctx ends first.
func ResampleContext(ctx context.Context, samples []int16, from, to int) ([]int16, error) {
	if from == to || len(samples) == 0 {
		return append([]int16(nil), samples...), nil
	}
	r := NewResampler(from, to)
	out := make([]int16, 0, r.OutLen(int64(len(samples))))
	for off := 0; off < len(samples); off += decodeChunk {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("audio: resampling stopped: %w", err)
		}
		out = r.Write(samples[off:min(off+decodeChunk, len(samples))], out)
	}
	return r.Flush(out), nil
}

// weights fills w (2*half taps) for an output at fractional offset frac
// (0..1) past input sample base: tap k weighs input base-half+1+k. The taps
// are normalised to sum to one so DC passes unchanged.
func weights(w []float64, frac float64, half int, cut float64) {
	var sum float64
	for k := range w {
		x := float64(k-half+1) - frac // distance of the tap from the output position
		v := cut * sinc(cut*x)
		if r := x / float64(half); r > -1 && r < 1 {
			v *= 0.5 + 0.5*math.Cos(math.Pi*r)
		} else {
			v = 0
		}
		w[k] = v
		sum += v
	}
	if sum != 0 {
		for k := range w {
			w[k] /= sum
		}
	}
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
