package diarize

import (
	"context"
	"fmt"
	"math"

	"github.com/sluice-dev/sluice/backends/onnx"
)

// params are a request's pipeline settings.
type params struct {
	vad        onnx.VADParams
	window     int     // frames per speaker window
	hop        int     // frames between windows
	penalty    float64 // BIC penalty weight of the speaker count
	minK, maxK int     // speaker-count bounds (1 <= minK <= maxK)
	smooth     int     // resegmentation: frames each side of the score smoothing
	minTurn    int     // frames: shorter runs join a neighbour
	mergeGap   float64 // seconds: one speaker's segments this close are merged
	iterations int     // resegmentation passes
	pitchW     float64 // weight of log F0 beside each cepstral dimension (0: unused)
}

// maxWindows bounds the clustering's cost (the n x n matrix and its
// merges): a longer recording's windows are spread further apart.
const maxWindows = 2000

// span is a speech region's frames [a, b).
type span struct{ a, b int }

// window is a speaker window's frames [a, b) in region.
type window struct{ a, b, region int }

// turn is one output segment: frames as seconds, a 0-based speaker.
type turn struct {
	start, end float64
	speaker    int
}

// run diarizes samples (mono, 16 kHz). Each stage checks ctx.
func (p params) run(ctx context.Context, vad *onnx.VAD, samples []int16) ([]turn, error) {
	regions, err := vad.Speech(ctx, samples, p.vad)
	if err != nil {
		return nil, fmt.Errorf("diarize: vad: %w", err)
	}
	return p.diarize(ctx, samples, regions)
}

// diarize labels the speech regions (sample ranges, in order) of samples.
func (p params) diarize(ctx context.Context, samples []int16, regions [][2]int) ([]turn, error) {
	if len(regions) == 0 {
		return nil, nil
	}
	frames, err := newMFCC().frames(ctx, samples)
	if err != nil {
		return nil, err
	}
	// Speech frames, by region: frame i covers samples [i*hop, i*hop+hop).
	var spans []span
	var speech []int
	for _, r := range regions {
		a, b := r[0]/frameHop, min(len(frames), (r[1]+frameHop-1)/frameHop)
		if b > a {
			spans = append(spans, span{a, b})
			for i := a; i < b; i++ {
				speech = append(speech, i)
			}
		}
	}
	if len(speech) == 0 {
		return nil, nil
	}
	if p.pitchW > 0 {
		if err := addPitch(ctx, samples, frames, spans, pitchCol); err != nil {
			return nil, err
		}
	}
	standardize(frames, speech)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Windows within regions.
	hop := max(p.hop, (len(speech)+maxWindows-1)/maxWindows)
	var wins []window
	for ri, s := range spans {
		n := s.b - s.a
		if n < p.window/4 {
			continue // too short to describe a voice: resegmentation labels it
		}
		if n <= p.window {
			wins = append(wins, window{s.a, s.b, ri})
			continue
		}
		for a := s.a; ; a += hop {
			if a+p.window >= s.b {
				wins = append(wins, window{max(s.a, s.b-p.window), s.b, ri})
				break
			}
			wins = append(wins, window{a, a + p.window, ri})
		}
	}
	if len(wins) > maxWindows {
		// Many short regions: keep an even subset; the regions left
		// without a window are labelled by the resegmentation.
		kept := make([]window, maxWindows)
		for i := range kept {
			kept[i] = wins[i*len(wins)/maxWindows]
		}
		wins = kept
	}
	labels := make([]int, len(frames)) // -1: no speech, or not yet labelled
	for i := range labels {
		labels[i] = -1
	}
	if len(wins) > 0 {
		vecs := make([][]float64, len(wins))
		idx := make([]int, len(wins))
		for i, w := range wins {
			fr := make([]int, 0, w.b-w.a)
			for f := w.a; f < w.b; f++ {
				fr = append(fr, f)
			}
			vecs[i] = embed(frames, fr)
			idx[i] = i
		}
		standardize(vecs, idx)
		for _, v := range vecs {
			v[pitchCol] *= p.pitchW
			v[featDim+pitchCol] *= p.pitchW
		}
		merges, _, err := dendrogram(ctx, cosineDistances(vecs), len(vecs))
		if err != nil {
			return nil, err
		}
		// Each count in range: the dendrogram's cut, resegmented; the
		// count whose Gaussians explain the speech frames best, less
		// penalty per frame for each speaker, wins. With every feature
		// standardised, one speaker scores the same per frame on any
		// recording, so the penalty is a gain per frame that each further
		// speaker must bring, independent of the recording's length;
		// BIC's term for each speaker's 2*featDim parameters is added, so
		// that a short recording, where a few hundred frames let any
		// split fit better, is not cut in two.
		lo := min(p.minK, len(wins))
		hi := min(p.maxK, len(wins), max(p.minK, maxSearch))
		bestScore := math.Inf(-1)
		var best []int
		for k := lo; k <= hi; k++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			wl := cut(merges, len(wins), k)
			cand := frameLabels(len(frames), spans, wins, wl)
			ll := p.resegment(frames, speech, spans, cand, k)
			n := float64(len(speech))
			score := ll - p.penalty*float64(k)*n - 0.5*float64(k*2*p.dims())*math.Log(n)
			if best == nil || score > bestScore {
				bestScore, best = score, cand
			}
		}
		labels = best
	} else {
		for _, f := range speech {
			labels[f] = 0
		}
	}
	return p.turns(labels, spans, regions), nil
}

// turns makes labelled speech frames (absorbing short runs in place) into
// merged turns.
func (p params) turns(labels []int, spans []span, regions [][2]int) []turn {
	var out []turn
	for ri, s := range spans {
		absorbShort(labels[s.a:s.b], p.minTurn)
		start := float64(regions[ri][0]) / rate
		for f := s.a; f < s.b; f++ {
			if f+1 == s.b || labels[f+1] != labels[f] {
				end := float64((f+1)*frameHop) / rate
				if f+1 == s.b {
					end = float64(regions[ri][1]) / rate
				}
				if end > start {
					out = append(out, turn{start, end, labels[f]})
				}
				start = end
			}
		}
	}
	return mergeTurns(out, p.mergeGap)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// dims is the number of frame features used.
func (p params) dims() int {
	if p.pitchW > 0 {
		return featDim
	}
	return 2 * numCeps
}

// gaussScores fits a diagonal Gaussian per speaker to its labelled speech
// frames and returns every speech frame's log-likelihood under each
// (scores[f*k+c]; frames outside speech are zero).
func (p params) gaussScores(frames [][]float64, speech, labels []int, k int) []float64 {
	w := make([]float64, featDim)
	for d := range w {
		w[d] = 1
	}
	w[pitchCol] = p.pitchW
	mean := make([][]float64, k)
	vars := make([][]float64, k)
	count := make([]float64, k)
	for c := range k {
		mean[c], vars[c] = make([]float64, featDim), make([]float64, featDim)
	}
	for _, f := range speech {
		c := labels[f]
		if c < 0 {
			continue
		}
		count[c]++
		for d, v := range frames[f] {
			mean[c][d] += v
			vars[c][d] += v * v
		}
	}
	logNorm := make([]float64, k)
	for c := range k {
		if count[c] == 0 {
			logNorm[c] = math.Inf(-1)
			continue
		}
		for d := range featDim {
			mu := mean[c][d] / count[c]
			mean[c][d] = mu
			vars[c][d] = max(vars[c][d]/count[c]-mu*mu, 1e-3)
			logNorm[c] -= 0.5 * w[d] * math.Log(2*math.Pi*vars[c][d])
		}
	}
	scores := make([]float64, len(frames)*k)
	for _, f := range speech {
		for c := range k {
			if count[c] == 0 {
				scores[f*k+c] = -1e30
				continue
			}
			s := logNorm[c]
			for d, v := range frames[f] {
				x := v - mean[c][d]
				s -= 0.5 * w[d] * x * x / vars[c][d]
			}
			scores[f*k+c] = s
		}
	}
	return scores
}

// smoothArgmax labels frames [a, b) with the speaker whose score summed
// over ±half frames (within [a, b)) is highest.
func smoothArgmax(scores []float64, labels []int, a, b, half int) {
	k := len(scores) / len(labels)
	sum := make([]float64, k)
	lo, hi := a, a // the summed frames are [lo, hi)
	for f := a; f < b; f++ {
		for hi < min(b, f+half+1) {
			for c := range k {
				sum[c] += scores[hi*k+c]
			}
			hi++
		}
		for lo < max(a, f-half) {
			for c := range k {
				sum[c] -= scores[lo*k+c]
			}
			lo++
		}
		best := 0
		for c := 1; c < k; c++ {
			if sum[c] > sum[best] {
				best = c
			}
		}
		labels[f] = best
	}
}

// absorbShort gives every run of one label shorter than minLen frames to
// its longer neighbour, shortest runs first, until none is left (or one
// run remains).
func absorbShort(labels []int, minLen int) {
	for {
		type run struct{ a, b int }
		var runs []run
		for f := 0; f < len(labels); {
			g := f
			for g < len(labels) && labels[g] == labels[f] {
				g++
			}
			runs = append(runs, run{f, g})
			f = g
		}
		if len(runs) < 2 {
			return
		}
		s := -1
		for i, r := range runs {
			if r.b-r.a < minLen && (s < 0 || r.b-r.a < runs[s].b-runs[s].a) {
				s = i
			}
		}
		if s < 0 {
			return
		}
		var to int
		switch {
		case s == 0:
			to = labels[runs[1].a]
		case s == len(runs)-1:
			to = labels[runs[s-1].a]
		case runs[s-1].b-runs[s-1].a >= runs[s+1].b-runs[s+1].a:
			to = labels[runs[s-1].a]
		default:
			to = labels[runs[s+1].a]
		}
		for f := runs[s].a; f < runs[s].b; f++ {
			labels[f] = to
		}
	}
}

// mergeTurns joins consecutive turns of one speaker at most gap seconds
// apart and renumbers speakers by first appearance.
func mergeTurns(ts []turn, gap float64) []turn {
	var out []turn
	for _, t := range ts {
		if n := len(out); n > 0 && out[n-1].speaker == t.speaker && t.start-out[n-1].end <= gap+1e-9 {
			out[n-1].end = t.end
			continue
		}
		out = append(out, t)
	}
	labels := make([]int, len(out))
	for i, t := range out {
		labels[i] = t.speaker
	}
	for i, l := range firstAppearance(labels) {
		out[i].speaker = l
	}
	return out
}

// maxSearch bounds the speaker counts tried when the request does not fix
// a larger lower bound.
const maxSearch = 8

// frameLabels gives each speech frame the label of the window of its
// region whose centre is nearest (-1 elsewhere, and in regions without a
// window).
func frameLabels(n int, spans []span, wins []window, wl []int) []int {
	labels := make([]int, n)
	for i := range labels {
		labels[i] = -1
	}
	wi := 0
	for ri, s := range spans {
		for wi < len(wins) && wins[wi].region < ri {
			wi++
		}
		if wi >= len(wins) || wins[wi].region != ri {
			continue
		}
		for f := s.a; f < s.b; f++ {
			best, bd := -1, math.MaxInt
			for j := wi; j < len(wins) && wins[j].region == ri; j++ {
				if d := abs(2*f - (wins[j].a + wins[j].b)); d < bd {
					best, bd = j, d
				}
			}
			labels[f] = wl[best]
		}
	}
	return labels
}

// resegment refines labels (k speakers) in place with p.iterations (>= 1) passes
// of Gaussian scoring and smoothing, and returns the log-likelihood of the
// speech frames under the final labels' Gaussians.
func (p params) resegment(frames [][]float64, speech []int, spans []span, labels []int, k int) float64 {
	for range p.iterations {
		scores := p.gaussScores(frames, speech, labels, k)
		for _, s := range spans {
			smoothArgmax(scores, labels, s.a, s.b, p.smooth)
		}
	}
	scores := p.gaussScores(frames, speech, labels, k)
	ll := 0.0
	for _, f := range speech {
		ll += scores[f*k+labels[f]]
	}
	return ll
}
