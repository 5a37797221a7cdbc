package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

// snrAgainstTone measures out (at rate to) against the ideal tone of freq
// and amplitude amp, away from the edges.
func snrAgainstTone(out []int16, to int, freq, amp float64) float64 {
	var errSum, sigSum float64
	for i := to / 10; i < len(out)-to/10; i++ {
		ideal := amp * math.Sin(2*math.Pi*freq*float64(i)/float64(to))
		errSum += (float64(out[i]) - ideal) * (float64(out[i]) - ideal)
		sigSum += ideal * ideal
	}
	return 10 * math.Log10(sigSum/errSum)
}

// The hostile rate pairs whose up factor exceeded the old exact table
// (1009->16000, 16000->383999) or whose kernel is long (383999->16000),
// and the extremes of MinRate..MaxRate.
func TestResampleQualityLargePairs(t *testing.T) {
	for _, c := range []struct {
		from, to int
		freq     float64
	}{
		{1009, 16000, 300}, {16000, 44100, 440}, {16000, 383999, 440}, {383999, 16000, 440},
		{22050, 48000, 1000}, {48000, 8000, 440}, {MinRate, MaxRate, 200}, {MaxRate, MinRate, 200},
		{16000, 24000, 440}, {44100, 16000, 440},
	} {
		t.Run(fmt.Sprintf("%d-%d", c.from, c.to), func(t *testing.T) {
			in := sine(c.from, c.freq, 1, 10000)
			out := Resample(in, c.from, c.to)
			if want := (len(in)*c.to + c.from - 1) / c.from; len(out) != want {
				t.Fatalf("%d samples, want %d", len(out), want)
			}
			if snr := snrAgainstTone(out, c.to, c.freq, 10000); snr < 40 {
				t.Fatalf("SNR %.1f dB, want >= 40", snr)
			}
		})
	}
}

// Large-up pairs must keep rejecting what the target cannot carry.
func TestResampleRemovesAliasesLargePairs(t *testing.T) {
	for _, c := range []struct {
		from, to int
		freq     float64
	}{{383999, 16000, 11000}, {44100, 1009, 700}} {
		out := Resample(sine(c.from, c.freq, 1, 10000), c.from, c.to)
		edge := c.to / 10
		var rms float64
		for _, v := range out[edge : len(out)-edge] {
			rms += float64(v) * float64(v)
		}
		rms = math.Sqrt(rms / float64(len(out)-2*edge))
		if rms > 100 {
			t.Errorf("%d->%d: alias energy rms %.0f, want < 100", c.from, c.to, rms)
		}
	}
}

// Pairs whose phases fit the exact table give the old resampler's output
// sample for sample: the rewrite changed the cost, not the sound.
func TestResampleMatchesOldOnExactPairs(t *testing.T) {
	for _, c := range []struct{ from, to int }{{44100, 16000}, {48000, 16000}, {8000, 16000}, {22050, 16000}, {16000, 24000}, {16000, 22050}} {
		in := sine(c.from, 523, 0.2, 12000)
		if got, want := Resample(in, c.from, c.to), oldResample(in, c.from, c.to); !equal(got, want) {
			t.Errorf("%d->%d differs from the old resampler", c.from, c.to)
		}
	}
}

// Feeding the stream in chunks of any size gives the whole-buffer result.
func TestResamplerChunksMatchWhole(t *testing.T) {
	in := sine(1009, 200, 2, 9000)
	for _, c := range []struct{ from, to int }{{1009, 16000}, {44100, 16000}, {383999, 16000}, {16000, 24000}} {
		want := Resample(in, c.from, c.to)
		for _, chunk := range []int{1, 7, 33, 1000, len(in)} {
			r := NewResampler(c.from, c.to)
			var got []int16
			for off := 0; off < len(in); off += chunk {
				got = r.Write(in[off:min(off+chunk, len(in))], got)
			}
			got = r.Flush(got)
			if !equal(got, want) {
				t.Errorf("%d->%d in chunks of %d: %d samples differ from the whole-buffer %d", c.from, c.to, chunk, len(got), len(want))
			}
		}
	}
}

// The streaming path allocates nothing per chunk once warm, however long
// the stream (the old slow path allocated per output sample).
func TestResamplerAllocsIndependentOfLength(t *testing.T) {
	for _, c := range []struct{ from, to int }{{1009, 16000}, {16000, 383999}, {383999, 16000}, {44100, 16000}} {
		chunk := sine(c.from, 300, 0.05, 8000)
		r := NewResampler(c.from, c.to)
		out := make([]int16, 0, 2*r.OutLen(int64(len(chunk)))+16)
		out = r.Write(chunk, out[:0]) // warm: the window and the edge pad
		allocs := testing.AllocsPerRun(50, func() {
			out = r.Write(chunk, out[:0])
		})
		if allocs != 0 {
			t.Errorf("%d->%d: %.1f allocations per chunk, want 0", c.from, c.to, allocs)
		}
	}
}

// BenchmarkResample runs the new resampler beside the old one on one
// second of audio for each pair: go test -bench Resample ./backends/audio/
func BenchmarkResample(b *testing.B) {
	for _, c := range []struct{ from, to int }{{1009, 16000}, {44100, 16000}, {16000, 24000}, {16000, 383999}} {
		in := sine(c.from, 300, 1, 9000)
		for _, impl := range []struct {
			name string
			f    func([]int16, int, int) []int16
		}{{"new", Resample}, {"old", oldResample}} {
			b.Run(fmt.Sprintf("%d-%d/%s", c.from, c.to, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					impl.f(in, c.from, c.to)
				}
			})
		}
	}
}

// oldDecodeInput is the old (unbounded) path of pocketsphinx: parse the whole
// WAV, resample all of it, only then compare with the limit.
func oldDecodeInput(data []byte, rate int) []int16 {
	a, err := ParseWAV(data)
	if err != nil {
		panic(err)
	}
	return oldResample(a.Samples, a.Rate, rate)
}

// BenchmarkIssueInputs measures the hostile inputs, new beside old: a
// 256 KiB and a 1 MiB 16-bit mono WAV at 1009 Hz decoded to 16 kHz, and
// 3 s of 16 kHz speech output resampled to 383999 Hz.
// go test -run '^$' -bench IssueInputs -benchtime 1x ./backends/audio/
func BenchmarkIssueInputs(b *testing.B) {
	for _, size := range []int{256 << 10, 1 << 20} {
		wav := WAV(1009, sine(1009, 200, float64(size/2)/1009, 8000))
		b.Run(fmt.Sprintf("decode-%dKiB-1009-16000/new", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeInput(context.Background(), backends.Request{Data: wav}, Want{Rate: 16000, MaxSeconds: 3600}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("decode-%dKiB-1009-16000-max300s/new", size>>10), func(b *testing.B) {
			b.ReportAllocs() // pocketsphinx's default limit: 1 MiB (520 s) is refused from the header
			for b.Loop() {
				_, _ = DecodeInput(context.Background(), backends.Request{Data: wav}, Want{Rate: 16000, MaxSeconds: 300})
			}
		})
		b.Run(fmt.Sprintf("decode-%dKiB-1009-16000/old", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				oldDecodeInput(wav, 16000)
			}
		})
	}
	speech := sine(16000, 300, 3, 9000)
	for _, impl := range []struct {
		name string
		f    func([]int16, int, int) []int16
	}{{"new", Resample}, {"old", oldResample}} {
		b.Run("output-3s-16000-383999/"+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				impl.f(speech, 16000, 383999)
			}
		})
	}
}

// Resamplers of many rate pairs at once share the bounded table cache
// safely (run with -race): more pairs than the cache holds, each result
// equal to a fresh single-threaded computation.
func TestResampleConcurrentPairs(t *testing.T) {
	in := sine(8000, 300, 0.05, 8000)
	pairs := make([][2]int, 0, 2*maxKernels)
	for i := range 2 * maxKernels {
		pairs = append(pairs, [2]int{8000, 11025 + 997*i})
	}
	want := make([][]int16, len(pairs))
	for i, p := range pairs {
		want[i] = Resample(in, p[0], p[1])
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(pairs)*4)
	for range 4 {
		for i, p := range pairs {
			wg.Go(func() {
				if got := Resample(in, p[0], p[1]); !equal(got, want[i]) {
					errs <- fmt.Sprintf("%d->%d differs when run concurrently", p[0], p[1])
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	kernels.Lock()
	n := len(kernels.m)
	kernels.Unlock()
	if n > maxKernels {
		t.Fatalf("%d cached tables, want at most %d", n, maxKernels)
	}
}

// A synthesis resampled for its output stops when its caller has left.
func TestEncodeTTSStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	samples := sine(22050, 300, 1, 8000)
	if _, err := EncodeTTS(ctx, TTSRequest{SampleRate: 48000}, 22050, samples); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	out, err := EncodeTTS(context.Background(), TTSRequest{SampleRate: 48000, Format: "pcm"}, 22050, samples)
	if err != nil || len(out.Data) != 2*48000 {
		t.Fatalf("%d bytes, %v", len(out.Data), err)
	}
	got, err := ResampleContext(context.Background(), samples, 22050, 48000)
	if err != nil || !equal(got, Resample(samples, 22050, 48000)) {
		t.Fatalf("ResampleContext differs from Resample: %v", err)
	}
}
