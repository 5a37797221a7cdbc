package der

import (
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Hand-made references, each scored by hand (no collar unless said).
func TestScoreHandMade(t *testing.T) {
	ref := []Turn{{"A", 0, 10}, {"B", 10, 20}}
	for _, c := range []struct {
		name                   string
		hyp                    []Turn
		collar                 float64
		scored, miss, fa, conf float64
	}{
		{"perfect, other labels", []Turn{{"x", 0, 10}, {"y", 10, 20}}, 0, 20, 0, 0, 0},
		{"all one speaker", []Turn{{"x", 0, 20}}, 0, 20, 0, 0, 10},
		{"nothing said", nil, 0, 20, 20, 0, 0},
		{"late start, early end", []Turn{{"x", 1, 10}, {"y", 10, 18}}, 0, 20, 3, 0, 0},
		{"speech in silence", []Turn{{"x", 0, 10}, {"y", 10, 25}}, 0, 20, 0, 5, 0},
		{"boundary 1 s late", []Turn{{"x", 0, 11}, {"y", 11, 20}}, 0, 20, 0, 0, 1},
		{"boundary 0.2 s late, collar", []Turn{{"x", 0, 10.2}, {"y", 10.2, 20}}, 0.25, 20 - 1.0, 0, 0, 0},
		{"swapped halves", []Turn{{"y", 0, 10}, {"x", 10, 20}}, 0, 20, 0, 0, 0},
		{"three hyp speakers", []Turn{{"x", 0, 5}, {"z", 5, 10}, {"y", 10, 20}}, 0, 20, 0, 0, 5},
	} {
		r := Score(ref, c.hyp, c.collar)
		if !near(r.Scored, c.scored) || !near(r.Missed, c.miss) || !near(r.FalseAlarm, c.fa) || !near(r.Confusion, c.conf) {
			t.Errorf("%s: got scored %.3f missed %.3f fa %.3f conf %.3f, want %.3f %.3f %.3f %.3f",
				c.name, r.Scored, r.Missed, r.FalseAlarm, r.Confusion, c.scored, c.miss, c.fa, c.conf)
		}
		if want := (c.miss + c.fa + c.conf) / c.scored; !near(r.DER, want) {
			t.Errorf("%s: DER %.4f, want %.4f", c.name, r.DER, want)
		}
	}
}

// The mapping is optimal, not greedy: the hypothesis speaker x overlaps A
// most, but giving x to B and y to A scores more time in all.
func TestOptimalMapping(t *testing.T) {
	ref := []Turn{{"A", 0, 6}, {"B", 6, 10}}
	hyp := []Turn{{"x", 0, 3.5}, {"y", 3.5, 6}, {"x", 6, 10}}
	// x->A: 3.5 correct; y unmapped (or ->B, 0): total 3.5.
	// x->B: 4, y->A: 2.5: total 6.5, confusion 3.5.
	r := Score(ref, hyp, 0)
	if r.Mapping["x"] != "B" || r.Mapping["y"] != "A" || !near(r.Confusion, 3.5) {
		t.Fatalf("mapping %v confusion %.3f", r.Mapping, r.Confusion)
	}
}

// Overlapping reference speech counts once per speaker, as in md-eval.
func TestOverlapCountsTwice(t *testing.T) {
	ref := []Turn{{"A", 0, 10}, {"B", 5, 15}}
	hyp := []Turn{{"x", 0, 10}, {"y", 10, 15}}
	r := Score(ref, hyp, 0)
	// scored 20; 5..10 has two reference speakers and one hypothesis: 5 missed.
	if !near(r.Scored, 20) || !near(r.Missed, 5) || !near(r.Confusion, 0) || !near(r.FalseAlarm, 0) {
		t.Fatalf("%+v", r)
	}
}

func TestCollarAtEdges(t *testing.T) {
	ref := []Turn{{"A", 1, 3}}
	hyp := []Turn{{"x", 0.9, 3.2}}
	r := Score(ref, hyp, NISTCollar)
	// Scored: 1.25..2.75 = 1.5 s, all correct; the FA at 0.9..1 and 3..3.2 is in the collars.
	if !near(r.Scored, 1.5) || r.DER != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestAssignRectangular(t *testing.T) {
	w := [][]float64{{1, 5, 0}, {4, 4, 0}}
	got := Assign(w)
	if got[0] != 1 || got[1] != 0 {
		t.Fatalf("%v", got)
	}
	if got := Assign([][]float64{{1}, {3}, {2}}); got[1] != 0 || got[0] != -1 || got[2] != -1 {
		t.Fatalf("%v", got)
	}
}

func TestRTTMRoundTrip(t *testing.T) {
	turns := []Turn{{"SPEAKER_00", 0.5, 2.25}, {"SPEAKER_01", 2.5, 4}}
	s := FormatRTTM("rec", turns)
	if !strings.HasPrefix(s, "SPEAKER rec 1 0.500 1.750 <NA> <NA> SPEAKER_00 <NA> <NA>\n") {
		t.Fatalf("%q", s)
	}
	got, err := ParseRTTM(strings.NewReader("\n;; comment\n" + s))
	if err != nil || len(got) != 2 || got[1].Speaker != "SPEAKER_01" || !near(got[1].End, 4) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ParseRTTM(strings.NewReader("SPEAKER a 1 x 1 <NA> <NA> s")); err == nil {
		t.Fatal("bad start accepted")
	}
}
