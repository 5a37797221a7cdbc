package evalset

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sluice-dev/sluice/backends/diarize/der"
)

// DialogSeed seeds the scored dialog set (`make bench-dialogs`); the
// engine's settings were never tuned on it (they come from DevSeed's
// Standard sets).
const DialogSeed = 32

// Dialog is one generated dialog: its recording and how many speakers it
// has.
type Dialog struct {
	Recording
	Speakers int
}

// DialogVoices returns the voices dialogs draw from: flite's four distinct
// ones, and eSpeak NG's two once AddEspeak opened them (kal16 is kal's
// man again and stays out).
func (g *Generator) DialogVoices() []string {
	out := slices.Clone(Voices)
	for _, v := range []string{"espeak-female", "espeak-low"} {
		if slices.Contains(g.names, v) {
			out = append(out, v)
		}
	}
	return out
}

// Dialogs generates n dialogs seeded by seed; dialog i depends on (seed,
// i) alone, so a subset (the first n) of a larger set is the same
// recordings. Each dialog is 10..60 s of one-sentence turns by 1..4
// speakers (weights 1:2:1.2:0.8, so half have two); every speaker has a
// level of -12..0 dB and each turn ±2 dB more, a speed of 0.85..1.15;
// between turns, 60% silences of 0.3..1.2 s, 15% of 50..150 ms (inside
// one VAD region), 5% of 2..4 s, and 20% overlaps of 0.1..0.5 s (the next
// turn starts before the last one ends, mixed; at most half the shorter
// turn). The reference has both turns over an overlap.
func (g *Generator) Dialogs(ctx context.Context, seed uint64, n int) ([]Dialog, error) {
	voices := g.DialogVoices()
	out := make([]Dialog, 0, n)
	for i := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		k := 1
		switch x := rng.Float64() * 5; {
		case x < 1:
			k = 1
		case x < 3:
			k = 2
		case x < 4.2:
			k = 3
		default:
			k = 4
		}
		perm := rng.Perm(len(voices))[:k]
		d, err := g.dialog(ctx, rng, fmt.Sprintf("dialog-%03d", i), voices, perm, 10+50*rng.Float64())
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (g *Generator) dialog(ctx context.Context, rng *rand.Rand, name string, voices []string, who []int, seconds float64) (Dialog, error) {
	d := Dialog{Recording: Recording{Name: name}, Speakers: len(who)}
	level := make([]float64, len(who))
	for i := range level {
		level[i] = -12 * rng.Float64()
	}
	var mix []float64
	pos := int((0.3 + 0.5*rng.Float64()) * Rate) // where the next turn starts
	lastLen := 0
	last := -1
	order := rng.Perm(len(who))
	for t := 0; t < len(who) || float64(pos)/Rate < seconds; t++ {
		if err := ctx.Err(); err != nil {
			return Dialog{}, err
		}
		var v int
		if t < len(order) {
			v = order[t]
		} else {
			for v = rng.IntN(len(who)); v == last && len(who) > 1; v = rng.IntN(len(who)) {
			}
		}
		text := Sentences[rng.IntN(len(Sentences))]
		speed := 0.85 + 0.3*rng.Float64()
		gain := math.Pow(10, (level[v]+4*rng.Float64()-2)/20)
		vi := slices.Index(g.names, voices[who[v]])
		pcm, err := g.speak(ctx, vi, text, speed)
		if err != nil {
			return Dialog{}, err
		}
		pcm = trim(pcm)
		// The gap before this turn (not before the first one).
		gapDraw := rng.Float64()
		if t > 0 {
			switch {
			case gapDraw < 0.2 && len(who) > 1 && v != last:
				ov := int((0.1 + 0.4*rng.Float64()) * Rate)
				ov = min(ov, lastLen/2, len(pcm)/2)
				pos -= ov
			case gapDraw < 0.35:
				pos += int((0.05 + 0.1*rng.Float64()) * Rate)
			case gapDraw < 0.4:
				pos += int((2 + 2*rng.Float64()) * Rate)
			default:
				pos += int((0.3 + 0.9*rng.Float64()) * Rate)
			}
		}
		if need := pos + len(pcm); need > len(mix) {
			mix = append(mix, make([]float64, need-len(mix))...)
		}
		for j, s := range pcm {
			mix[pos+j] += float64(s) * gain
		}
		d.Ref = append(d.Ref, turnOf(voices[who[v]], pos, pos+len(pcm)))
		pos += len(pcm)
		lastLen, last = len(pcm), v
	}
	mix = append(mix, make([]float64, Rate/2)...)
	d.Samples = make([]int16, len(mix))
	for i, x := range mix {
		d.Samples[i] = int16(max(-32768, min(32767, math.Round(x))))
	}
	return d, nil
}

// turnOf is a reference turn over samples [a, b).
func turnOf(speaker string, a, b int) der.Turn {
	return der.Turn{Speaker: speaker, Start: float64(a) / Rate, End: float64(b) / Rate}
}

// DialogScore sums a system's answers over a dialog set.
type DialogScore struct {
	N          int
	CountRight int            // dialogs whose hypothesis has the reference's speaker count
	ByCount    map[int][2]int // speakers -> {right, dialogs}
	DER        []float64      // per dialog, sorted ascending
	Wrong      []string       // "name: want k, got j"
	speakers   []int          // per dialog, in order
	ders       []float64      // per dialog, in order
	right      []bool         // per dialog, in order
}

// Only returns the score of the dialogs with k speakers.
func (s DialogScore) Only(k int) DialogScore {
	o := DialogScore{ByCount: map[int][2]int{}}
	for i, n := range s.speakers {
		if n != k {
			continue
		}
		o.N++
		c := o.ByCount[k]
		c[1]++
		if s.right[i] {
			o.CountRight++
			c[0]++
		}
		o.ByCount[k] = c
		o.DER = append(o.DER, s.ders[i])
	}
	slices.Sort(o.DER)
	return o
}

// Percentile returns the p-quantile (0..1) of the per-dialog DERs
// (nearest rank).
func (s DialogScore) Percentile(p float64) float64 {
	if len(s.DER) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(s.DER)))) - 1
	return s.DER[max(0, min(len(s.DER)-1, i))]
}

// Accuracy is the share of dialogs whose speaker count was right.
func (s DialogScore) Accuracy() float64 {
	if s.N == 0 {
		return 0
	}
	return float64(s.CountRight) / float64(s.N)
}

// String is the score's one-line summary.
func (s DialogScore) String() string {
	out := fmt.Sprintf("dialogs %d: count right %d (%.1f%%)", s.N, s.CountRight, 100*s.Accuracy())
	for k := 1; k <= 8; k++ {
		if c, ok := s.ByCount[k]; ok {
			out += fmt.Sprintf(", %d spk %d/%d", k, c[0], c[1])
		}
	}
	return out + fmt.Sprintf("; DER median %.1f%% p90 %.1f%% max %.1f%%", 100*s.Percentile(0.5), 100*s.Percentile(0.9), 100*s.Percentile(1))
}

// ScoreDialogs diarizes every dialog with sys and scores it (DER with
// der.NISTCollar; the count of distinct hypothesis speakers against the
// dialog's).
func ScoreDialogs(ctx context.Context, ds []Dialog, sys func(context.Context, Dialog) ([]der.Turn, error)) (DialogScore, error) {
	s := DialogScore{ByCount: map[int][2]int{}}
	for _, d := range ds {
		hyp, err := sys(ctx, d)
		if err != nil {
			return s, fmt.Errorf("%s: %w", d.Name, err)
		}
		var spk []string
		for _, h := range hyp {
			if !slices.Contains(spk, h.Speaker) {
				spk = append(spk, h.Speaker)
			}
		}
		c := s.ByCount[d.Speakers]
		c[1]++
		if len(spk) == d.Speakers {
			s.CountRight++
			c[0]++
		} else {
			s.Wrong = append(s.Wrong, fmt.Sprintf("%s (%.0f s): want %d, got %d", d.Name, d.Seconds(), d.Speakers, len(spk)))
		}
		s.ByCount[d.Speakers] = c
		s.N++
		e := der.Score(d.Ref, hyp, der.NISTCollar).DER
		s.DER = append(s.DER, e)
		s.speakers = append(s.speakers, d.Speakers)
		s.ders = append(s.ders, e)
		s.right = append(s.right, len(spk) == d.Speakers)
	}
	slices.Sort(s.DER)
	return s, nil
}
