package openai

import (
	"errors"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

func TestParseDiarization(t *testing.T) {
	p, in, err := ParseDiarization(map[string][]string{"model": {"d"}, "min_speakers": {"2"}, "max_speakers": {"4"}, "response_format": {"rttm"}}, nil)
	if err != nil || p.Model != "d" || p.ResponseFormat != "rttm" || string(in) != `{"min_speakers":2,"max_speakers":4}` {
		t.Fatalf("%+v %s %v", p, in, err)
	}
	if lo, hi := p.Request.Bounds(); lo != 2 || hi != 4 {
		t.Fatalf("bounds %d %d", lo, hi)
	}
	p, in, err = ParseDiarization(map[string][]string{"model": {"d"}, "num_speakers": {""}}, []byte(`{"sample_rate":8000}`))
	if err != nil || p.ResponseFormat != "json" || string(in) != `{"sample_rate":8000}` {
		t.Fatalf("%+v %s %v", p, in, err)
	}
	for _, f := range []map[string][]string{
		{"num_speakers": {"0"}},
		{"num_speakers": {"33"}},
		{"num_speakers": {"two"}},
		{"num_speakers": {"2.5"}},
		{"min_speakers": {"3"}, "max_speakers": {"2"}},
		{"num_speakers": {"2"}, "max_speakers": {"3"}},
		{"response_format": {"text"}},
		{"speakers": {"2"}},
		{"num_speakers": {"2", "3"}},
	} {
		if _, _, err := ParseDiarization(f, nil); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%v: %v", f, err)
		}
	}
}

func TestDiarizationRTTM(t *testing.T) {
	r := audio.DiarizationResult{Duration: 3, Segments: []audio.DiarizationSegment{{Start: 0.25, End: 1.5, Speaker: "SPEAKER_00"}, {Start: 1.75, End: 3, Speaker: "SPEAKER_01"}}}
	want := "SPEAKER a 1 0.250 1.250 <NA> <NA> SPEAKER_00 <NA> <NA>\nSPEAKER a 1 1.750 1.250 <NA> <NA> SPEAKER_01 <NA> <NA>\n"
	if got := RTTM(r, "a"); got != want {
		t.Fatalf("%q", got)
	}
}
