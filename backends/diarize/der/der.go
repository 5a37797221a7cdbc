// Package der scores a diarization against a reference: the diarization
// error rate of NIST's md-eval (missed speech, false alarm and speaker
// confusion over the scored reference speech time), with the optimal
// one-to-one mapping of hypothesis speakers onto reference speakers and a
// forgiveness collar around every reference boundary. It also reads and
// writes RTTM SPEAKER lines.
//
// Overlapping speech is scored as md-eval does: an instant with two
// reference speakers counts twice in the scored time.
//
// Threading rule: every function is pure and safe for concurrent use.
package der

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Turn is one speaker's stretch of speech, in seconds.
type Turn struct {
	Speaker    string
	Start, End float64
}

// Result is a score. Times are seconds; DER is (Missed + FalseAlarm +
// Confusion) / Scored, 0 when nothing is scored.
type Result struct {
	Scored     float64 // reference speaker time outside the collars
	Missed     float64
	FalseAlarm float64
	Confusion  float64
	DER        float64
	// Mapping maps each hypothesis speaker to the reference speaker it was
	// matched with (absent: matched with none).
	Mapping map[string]string
}

// Add sums two results (their DER recomputed); the mapping is dropped.
func (r Result) Add(o Result) Result {
	s := Result{Scored: r.Scored + o.Scored, Missed: r.Missed + o.Missed, FalseAlarm: r.FalseAlarm + o.FalseAlarm, Confusion: r.Confusion + o.Confusion}
	if s.Scored > 0 {
		s.DER = (s.Missed + s.FalseAlarm + s.Confusion) / s.Scored
	}
	return s
}

// NISTCollar is md-eval's usual forgiveness collar: 0.25 s each side of
// every reference boundary is not scored.
const NISTCollar = 0.25

// Score compares hyp with ref, leaving collar seconds each side of every
// reference turn boundary unscored. Turns with End <= Start are ignored.
func Score(ref, hyp []Turn, collar float64) Result {
	ref, hyp = clean(ref), clean(hyp)
	// The unscored zones: [b-collar, b+collar] around each reference boundary.
	var zones [][2]float64
	if collar > 0 {
		for _, t := range ref {
			zones = append(zones, [2]float64{t.Start - collar, t.Start + collar}, [2]float64{t.End - collar, t.End + collar})
		}
	}
	zones = union(zones)
	// Elementary intervals between every boundary of ref, hyp and zones.
	var cuts []float64
	for _, t := range ref {
		cuts = append(cuts, t.Start, t.End)
	}
	for _, t := range hyp {
		cuts = append(cuts, t.Start, t.End)
	}
	for _, z := range zones {
		cuts = append(cuts, z[0], z[1])
	}
	sort.Float64s(cuts)
	refIdx, hypIdx := index(ref), index(hyp)
	refNames, hypNames := names(ref), names(hyp)
	// overlap[h][r]: scored time hypothesis speaker h and reference r share.
	overlap := make([][]float64, len(hypNames))
	for i := range overlap {
		overlap[i] = make([]float64, len(refNames))
	}
	type piece struct {
		dur  float64
		r, h []int
	}
	var pieces []piece
	zi := 0
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		if b-a <= 0 {
			continue
		}
		mid := (a + b) / 2
		for zi < len(zones) && zones[zi][1] <= mid {
			zi++
		}
		if zi < len(zones) && zones[zi][0] <= mid {
			continue // inside a collar
		}
		p := piece{dur: b - a, r: active(ref, refIdx, mid), h: active(hyp, hypIdx, mid)}
		if len(p.r) == 0 && len(p.h) == 0 {
			continue
		}
		for _, h := range p.h {
			for _, r := range p.r {
				overlap[h][r] += p.dur
			}
		}
		pieces = append(pieces, p)
	}
	assign := Assign(overlap) // hyp index -> ref index or -1
	res := Result{Mapping: map[string]string{}}
	for h, r := range assign {
		if r >= 0 && overlap[h][r] > 0 {
			res.Mapping[hypNames[h]] = refNames[r]
		} else {
			assign[h] = -1
		}
	}
	for _, p := range pieces {
		nr, nh := len(p.r), len(p.h)
		res.Scored += p.dur * float64(nr)
		res.Missed += p.dur * float64(max(0, nr-nh))
		res.FalseAlarm += p.dur * float64(max(0, nh-nr))
		correct := 0
		for _, h := range p.h {
			for _, r := range p.r {
				if assign[h] == r {
					correct++
				}
			}
		}
		res.Confusion += p.dur * float64(min(nr, nh)-correct)
	}
	if res.Scored > 0 {
		res.DER = (res.Missed + res.FalseAlarm + res.Confusion) / res.Scored
	}
	return res
}

func clean(ts []Turn) []Turn {
	var out []Turn
	for _, t := range ts {
		if t.End > t.Start && !math.IsNaN(t.Start) && !math.IsInf(t.End, 0) {
			out = append(out, t)
		}
	}
	return out
}

// union merges overlapping intervals, sorted by start.
func union(iv [][2]float64) [][2]float64 {
	sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
	var out [][2]float64
	for _, v := range iv {
		if n := len(out); n > 0 && v[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], v[1])
			continue
		}
		out = append(out, v)
	}
	return out
}

func names(ts []Turn) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		if !seen[t.Speaker] {
			seen[t.Speaker] = true
			out = append(out, t.Speaker)
		}
	}
	sort.Strings(out)
	return out
}

func index(ts []Turn) map[string]int {
	m := map[string]int{}
	for i, n := range names(ts) {
		m[n] = i
	}
	return m
}

// active returns the distinct speaker indices speaking at time t.
func active(ts []Turn, idx map[string]int, t float64) []int {
	var out []int
	for _, x := range ts {
		if x.Start <= t && t < x.End {
			i := idx[x.Speaker]
			dup := false
			for _, o := range out {
				dup = dup || o == i
			}
			if !dup {
				out = append(out, i)
			}
		}
	}
	return out
}

// ParseRTTM reads the SPEAKER lines of an RTTM file (other line types and
// blank lines are skipped): SPEAKER file channel start duration <NA> <NA>
// speaker <NA> <NA>.
func ParseRTTM(r io.Reader) ([]Turn, error) {
	var out []Turn
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "SPEAKER" {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("rttm line %d: %d fields, want at least 8", n, len(f))
		}
		start, err1 := strconv.ParseFloat(f[3], 64)
		dur, err2 := strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil || dur < 0 || start < 0 {
			return nil, fmt.Errorf("rttm line %d: bad start or duration %q %q", n, f[3], f[4])
		}
		out = append(out, Turn{Speaker: f[7], Start: start, End: start + dur})
	}
	return out, sc.Err()
}

// FormatRTTM writes turns as RTTM SPEAKER lines of file (channel 1,
// milliseconds).
func FormatRTTM(file string, turns []Turn) string {
	var b strings.Builder
	for _, t := range turns {
		fmt.Fprintf(&b, "SPEAKER %s 1 %.3f %.3f <NA> <NA> %s <NA> <NA>\n", file, t.Start, t.End-t.Start, t.Speaker)
	}
	return b.String()
}
