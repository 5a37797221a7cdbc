package diarize

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/diarize/der"
	"github.com/sluice-dev/sluice/backends/diarize/evalset"
	"github.com/sluice-dev/sluice/backends/internal/pollctx"
)

// spec is a one-slot spec over the installed Silero model (make deps); a
// missing model fails the test.
func spec(t *testing.T, opts string) backends.Spec {
	t.Helper()
	return backends.Spec{Task: Task, Engine: Name, Checkpoint: catalogue.DefaultSources("").SileroModel(), Options: json.RawMessage(opts), Slots: 1}
}

func generate(t *testing.T, sp evalset.Spec) evalset.Recording {
	t.Helper()
	ctx := context.Background()
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		t.Fatalf("flite (make deps): %v", err)
	}
	defer g.Close(ctx)
	recs, err := g.Generate(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	return recs[0]
}

func diarizeRec(t *testing.T, s backends.Session, r evalset.Recording, q audio.DiarizationRequest) ([]der.Turn, audio.DiarizationResult) {
	t.Helper()
	in, _ := json.Marshal(q)
	o, err := s.Infer(context.Background(), backends.Request{Input: in, Data: r.WAV()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res audio.DiarizationResult
	if err := json.Unmarshal(o.JSON, &res); err != nil {
		t.Fatal(err)
	}
	var hyp []der.Turn
	for _, seg := range res.Segments {
		hyp = append(hyp, der.Turn{Speaker: seg.Speaker, Start: seg.Start, End: seg.End})
	}
	return hyp, res
}

func speakers(hyp []der.Turn) []string {
	var out []string
	for _, h := range hyp {
		if !slices.Contains(out, h.Speaker) {
			out = append(out, h.Speaker)
		}
	}
	return out
}

// A short two-speaker recording: two speakers found, labelled in order of
// first appearance, and a DER within the 2-speaker target.
func TestTwoSpeakers(t *testing.T) {
	rec := generate(t, evalset.Spec{Name: "t2", Speakers: 2, Recordings: 1, Seconds: 10, Seed: 77})
	s, _, err := New(Config{}).Open(context.Background(), spec(t, `{}`))
	if err != nil {
		t.Fatalf("open (make deps installs ONNX Runtime and Silero): %v", err)
	}
	defer s.Close(context.Background())
	hyp, res := diarizeRec(t, s, rec, audio.DiarizationRequest{})
	if got := speakers(hyp); !slices.Equal(got, []string{"SPEAKER_00", "SPEAKER_01"}) {
		t.Fatalf("speakers %v in %+v", got, res)
	}
	sc := der.Score(rec.Ref, hyp, der.NISTCollar)
	t.Logf("%.1f s, DER %.1f%% (miss %.2f fa %.2f conf %.2f of %.2f s)", rec.Seconds(), 100*sc.DER, sc.Missed, sc.FalseAlarm, sc.Confusion, sc.Scored)
	if sc.DER > 0.10 {
		t.Fatalf("DER %.3f over 10%%: %+v against %+v", sc.DER, hyp, rec.Ref)
	}
	if res.Duration != float64(int(rec.Seconds()*1000+0.5))/1000 {
		t.Fatalf("duration %v, want %v", res.Duration, rec.Seconds())
	}
	// num_speakers=1 puts everything on one speaker; min_speakers=3 finds three.
	if hyp, _ := diarizeRec(t, s, rec, audio.DiarizationRequest{NumSpeakers: 1}); len(speakers(hyp)) != 1 {
		t.Fatalf("num_speakers=1: %v", speakers(hyp))
	}
	if hyp, _ := diarizeRec(t, s, rec, audio.DiarizationRequest{MinSpeakers: 3}); len(speakers(hyp)) < 3 {
		t.Fatalf("min_speakers=3: %v", speakers(hyp))
	}
	if hyp, _ := diarizeRec(t, s, rec, audio.DiarizationRequest{MaxSpeakers: 1}); len(speakers(hyp)) != 1 {
		t.Fatalf("max_speakers=1: %v", speakers(hyp))
	}
}

// Silence has no speakers: an empty list, not an error.
func TestSilence(t *testing.T) {
	s, _, err := New(Config{}).Open(context.Background(), spec(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	o, err := s.Infer(context.Background(), backends.Request{Data: audio.WAV(16000, make([]int16, 32000))}, nil)
	if err != nil || string(o.JSON) != `{"duration":2,"segments":[]}` {
		t.Fatalf("%s %v", o.JSON, err)
	}
}

// A cancelled request stops with its context's error.
func TestCancelled(t *testing.T) {
	s, _, err := New(Config{}).Open(context.Background(), spec(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Infer(ctx, backends.Request{Data: audio.WAV(16000, make([]int16, 16000))}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestBadRequestsAndOptions(t *testing.T) {
	e := New(Config{})
	for _, o := range []string{`{"penalty":-1}`, `{"window_ms":100}`, `{"hop_ms":5000}`, `{"max_seconds":7200}`, `{"iterations":11}`, `{"bogus":1}`, `{"min_silence_ms":700000}`, `{"features":"plp"}`, `{"pitch_weight":11}`, `{"pitch_weight":-1}`} {
		if err := e.Validate(spec(t, o)); err == nil {
			t.Errorf("options %s accepted", o)
		}
	}
	sp := spec(t, `{}`)
	sp.Task = "vad"
	if err := e.Validate(sp); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("task vad: %v", err)
	}
	s, _, err := e.Open(context.Background(), spec(t, `{"max_seconds":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, in := range []string{`{"num_speakers":2,"min_speakers":1}`, `{"min_speakers":3,"max_speakers":2}`, `{"num_speakers":33}`, `{"num_speakers":-1}`, `{"speakers":2}`} {
		_, err := s.Infer(context.Background(), backends.Request{Input: json.RawMessage(in), Data: audio.WAV(16000, make([]int16, 160))}, nil)
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: %v", in, err)
		}
	}
	// audio.duration-limit: 2 s over a 1 s limit, refused from the header.
	if _, err := s.Infer(context.Background(), backends.Request{Data: audio.WAV(16000, make([]int16, 32000))}, nil); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("over max_seconds: %v", err)
	}
}

func TestAbsorbShortAndMerge(t *testing.T) {
	l := []int{0, 0, 0, 1, 0, 0, 2, 2, 2, 2}
	absorbShort(l, 2)
	if !slices.Equal(l, []int{0, 0, 0, 0, 0, 0, 2, 2, 2, 2}) {
		t.Fatalf("%v", l)
	}
	got := mergeTurns([]turn{{0, 1, 5}, {1.2, 2, 5}, {2, 3, 1}, {4, 5, 5}}, 0.3)
	want := []turn{{0, 2, 0}, {2, 3, 1}, {4, 5, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("%v", got)
	}
}

// The dendrogram of two tight groups cuts into them at k=2.
func TestDendrogramCut(t *testing.T) {
	vecs := [][]float64{{1, 0}, {0, 1}, {0.9, 0.1}, {0.1, 0.9}, {1, 0.05}}
	merges, _, err := dendrogram(context.Background(), cosineDistances(vecs), len(vecs))
	if err != nil {
		t.Fatal(err)
	}
	if got := cut(merges, len(vecs), 2); !slices.Equal(got, []int{0, 1, 0, 1, 0}) {
		t.Fatalf("%v", got)
	}
	if got := cut(merges, len(vecs), 1); !slices.Equal(got, []int{0, 0, 0, 0, 0}) {
		t.Fatalf("%v", got)
	}
}

// diar.engine: a request cancelled at any of the points where the
// pipeline checks its context (decoding, before Silero, features,
// clustering, each speaker count) ends with the context's error, and the
// session answers the next request as before. Silero's windows run in one
// native call that the context's end terminates through ONNX Runtime's
// run options (backends/onnx TestShimCancelMidRequest), so they make no
// checks of their own.
func TestCancelledAtEveryStage(t *testing.T) {
	rec := generate(t, evalset.Spec{Name: "c", Speakers: 2, Recordings: 1, Seconds: 4, Seed: 78})
	s, _, err := New(Config{}).Open(context.Background(), spec(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	req := backends.Request{Data: rec.WAV()}
	want, err := s.Infer(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	probe := pollctx.New(1 << 30)
	if _, err := s.Infer(probe, req, nil); err != nil {
		t.Fatal(err)
	}
	total := probe.Calls()
	if total < 10 {
		t.Fatalf("only %d context checks in a %.1f-s request", total, rec.Seconds())
	}
	for _, n := range []int{1, total / 2, total - 1} {
		if _, err := s.Infer(pollctx.New(n), req, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at check %d of %d: %v", n, total, err)
		}
	}
	got, err := s.Infer(context.Background(), req, nil)
	if err != nil || string(got.JSON) != string(want.JSON) {
		t.Fatalf("after the cancels: %s %v, want %s", got.JSON, err, want.JSON)
	}
}

// One voice in a short clip with a pause stays one speaker: a few hundred
// frames let any split fit better, which the BIC term forbids.
func TestShortClipOneSpeaker(t *testing.T) {
	ctx := context.Background()
	g, err := evalset.NewGenerator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	s, _, err := New(Config{}).Open(ctx, spec(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, v := range []string{"slt", "awb"} {
		recs, err := g.Generate(ctx, evalset.Spec{Name: "one", Recordings: 1, Seconds: 3, Seed: 5, Voices: []string{v}})
		if err != nil {
			t.Fatal(err)
		}
		hyp, res := diarizeRec(t, s, recs[0], audio.DiarizationRequest{})
		if got := speakers(hyp); len(got) != 1 {
			t.Errorf("%s, %.1f s: %v in %+v", v, recs[0].Seconds(), got, res)
		}
	}
}
