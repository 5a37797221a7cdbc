package sherpa

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Speaker diarization (task diarization, POST /v1/audio/diarization):
// pyannote's segmentation model finds who speaks when within 10 s
// windows, the embedding extractor describes each local speaker, and the
// library's clustering joins them: into the request's num_speakers, or by
// the checkpoint's threshold. min_speakers and max_speakers bound a
// thresholded count: a count outside them is clustered again to the
// nearest bound. The clustering is set per request with the library's
// SetConfig, which replaces the object's clusterer, so each slot has its
// own diarization object (family perSlot). Cancellation: Process cannot be
// interrupted; the audio is bounded by max_seconds before it starts.

// diarizationConfig builds the library config with numClusters (0: use
// the threshold), its strings owned by cs.
func (c *config) diarizationConfig(cs *cstrings, numClusters int) *diarizationConfig {
	cfg := cAlloc[diarizationConfig]()
	cfg.Segmentation = segmentationConfig{Pyannote: pyannoteConfig{Model: cs.of(c.files["segmentation"])}, NumThreads: int32(c.opts.Threads), Provider: cs.of("cpu")}
	cfg.Embedding = embeddingConfig{Model: cs.of(c.files["embedding"]), NumThreads: int32(c.opts.Threads), Provider: cs.of("cpu")}
	cfg.Clustering = clusteringConfig{NumClusters: -1, Threshold: float32(c.opts.Threshold)}
	if numClusters > 0 {
		cfg.Clustering.NumClusters = int32(numClusters)
	}
	cfg.MinDurationOn, cfg.MinDurationOff = float32(c.opts.MinDurationOn), float32(c.opts.MinDurationOff)
	return cfg
}

// DiarizeInput is a diarization request's Input on this engine: the
// common fields, the known speakers (OpenAI's known_speaker_names[] with
// known_speaker_references[]), or Embedding for the speaker embedding of
// the whole audio instead of a diarization.
type DiarizeInput struct {
	audio.DiarizationRequest
	KnownSpeakers []audio.KnownSpeaker `json:"known_speakers,omitempty"`
	Embedding     bool                 `json:"embedding,omitempty"`
}

// EmbeddingResult is the Output.JSON of an embedding request.
type EmbeddingResult struct {
	Duration  float64   `json:"duration"`
	Dim       int       `json:"dim"`
	Embedding []float32 `json:"embedding"` // L2-normalised
}

// knownSimilarity is the least cosine similarity between a known
// speaker's reference and a found speaker for the name to apply.
const knownSimilarity = 0.5

// maxReferenceSeconds bounds each known speaker's reference audio.
const maxReferenceSeconds = 30

// diarize answers one diarization request on this slot's object. Known
// speakers: each reference's embedding (the extractor over its audio) is
// compared with each found speaker's (the extractor over that speaker's
// segments, joined, at most maxReferenceSeconds); in the order given, a
// known speaker names the most similar found speaker not yet named, when
// the cosine similarity reaches knownSimilarity. The others keep
// SPEAKER_nn names.
func (m *model) diarize(ctx context.Context, req backends.Request) (backends.Output, error) {
	var in DiarizeInput
	if err := audio.DecodeStrict(req.Input, &in); err != nil {
		return backends.Output{}, err
	}
	r := in.DiarizationRequest
	if err := r.Check(); err != nil {
		return backends.Output{}, err
	}
	if err := audio.CheckKnownSpeakers(in.KnownSpeakers); err != nil {
		return backends.Output{}, err
	}
	if in.Embedding {
		if len(in.KnownSpeakers) > 0 || r.NumSpeakers+r.MinSpeakers+r.MaxSpeakers > 0 {
			return backends.Output{}, backends.Invalidf("sherpa: an embedding request takes no speaker counts and no known speakers")
		}
		return m.embeddingOf(ctx, req, r.SampleRate)
	}
	var refs [][]float32
	for i, k := range in.KnownSpeakers {
		a, err := audio.DecodeInput(ctx, backends.Request{Data: k.Audio}, audio.Want{Rate: SampleRate, MaxSeconds: maxReferenceSeconds})
		if err != nil {
			return backends.Output{}, backends.Invalidf("known_speaker_references[%d] (%s): %v", i, k.Name, err)
		}
		e, err := m.embed(ctx, a.Samples)
		if err != nil {
			return backends.Output{}, err
		}
		if e == nil {
			return backends.Output{}, backends.Invalidf("known_speaker_references[%d] (%s): too short for a speaker embedding", i, k.Name)
		}
		refs = append(refs, e)
	}
	a, err := audio.DecodeInput(ctx, req, audio.Want{Rate: SampleRate, MaxSeconds: float64(m.cfg.opts.MaxSeconds), RawRate: r.SampleRate})
	if err != nil {
		return backends.Output{}, fmt.Errorf("sherpa: %w", err)
	}
	samples := floatSamples(a.Samples)
	defer native.Free(samples)
	lo, hi := r.Bounds()
	segs, err := m.process(ctx, samples, len(a.Samples), r.NumSpeakers)
	if err != nil {
		return backends.Output{}, err
	}
	if n := speakersOf(segs); r.NumSpeakers == 0 && n > 0 && (n < lo || n > hi) {
		if segs, err = m.process(ctx, samples, len(a.Samples), max(lo, min(hi, n))); err != nil {
			return backends.Output{}, err
		}
	}
	dur := math.Round(a.Seconds()*1000) / 1000
	res := audio.DiarizationResult{Duration: dur, Segments: []audio.DiarizationSegment{}}
	names := map[int32]string{}
	if len(refs) > 0 {
		if names, err = m.nameKnown(ctx, a.Samples, segs, in.KnownSpeakers, refs); err != nil {
			return backends.Output{}, err
		}
	}
	anon := 0
	for _, s := range segs {
		name, ok := names[s.Speaker]
		if !ok {
			name = fmt.Sprintf("SPEAKER_%02d", anon)
			anon++
			names[s.Speaker] = name
		}
		start := math.Round(float64(s.Start)*1000) / 1000
		end := math.Round(float64(s.End)*1000) / 1000
		res.Segments = append(res.Segments, audio.DiarizationSegment{Start: max(0, min(dur, start)), End: max(0, min(dur, end)), Speaker: name})
	}
	b, err := json.Marshal(res)
	if err != nil {
		return backends.Output{}, err
	}
	return backends.Output{JSON: b}, nil
}

// process sets the clustering and runs the library on samples (C memory,
// n floats), returning the segments sorted by start.
func (m *model) process(ctx context.Context, samples unsafe.Pointer, n, numClusters int) ([]diarizationSegment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var cs cstrings
	cfg := m.cfg.diarizationConfig(&cs, numClusters)
	m.lib.sdSetConfig(m.ptr, unsafe.Pointer(cfg))
	freeC(unsafe.Pointer(cfg))
	cs.free()
	hook("diarize")
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rp := m.lib.sdProcess(m.ptr, samples, int32(n))
	if err := ctx.Err(); err != nil {
		if rp != 0 {
			m.lib.sdFreeResult(rp)
		}
		return nil, err
	}
	if rp == 0 {
		return nil, nil // too short for a segmentation window, or no speech
	}
	defer m.lib.sdFreeResult(rp)
	count := int(m.lib.sdNumSegments(rp))
	if count <= 0 {
		return nil, nil
	}
	sp := m.lib.sdSorted(rp)
	if sp == 0 {
		return nil, nil
	}
	defer m.lib.sdFreeSegments(sp)
	return append([]diarizationSegment(nil), unsafe.Slice((*diarizationSegment)(native.Ptr(sp)), count)...), nil
}

// nameKnown maps found speakers to known names (see diarize).
func (m *model) nameKnown(ctx context.Context, pcm []int16, segs []diarizationSegment, known []audio.KnownSpeaker, refs [][]float32) (map[int32]string, error) {
	var order []int32
	audioOf := map[int32][]int16{}
	for _, s := range segs {
		if _, ok := audioOf[s.Speaker]; !ok {
			order = append(order, s.Speaker)
			audioOf[s.Speaker] = nil
		}
		a := max(0, min(len(pcm), int(float64(s.Start)*SampleRate)))
		b := max(a, min(len(pcm), int(float64(s.End)*SampleRate)))
		room := maxReferenceSeconds*SampleRate - len(audioOf[s.Speaker])
		audioOf[s.Speaker] = append(audioOf[s.Speaker], pcm[a:a+min(b-a, max(0, room))]...)
	}
	embs := map[int32][]float32{}
	for _, sp := range order {
		e, err := m.embed(ctx, audioOf[sp])
		if err != nil {
			return nil, err
		}
		embs[sp] = e
	}
	names := map[int32]string{}
	for i, ref := range refs {
		best, bestSim := int32(-1), float32(knownSimilarity)
		for _, sp := range order {
			if _, taken := names[sp]; taken || embs[sp] == nil {
				continue
			}
			if sim := dot(ref, embs[sp]); sim >= bestSim {
				best, bestSim = sp, sim
			}
		}
		if best >= 0 {
			names[best] = known[i].Name
		}
	}
	return names, nil
}

// embeddingOf answers an embedding request: the extractor over the whole
// audio (at most maxReferenceSeconds).
func (m *model) embeddingOf(ctx context.Context, req backends.Request, rawRate int) (backends.Output, error) {
	a, err := audio.DecodeInput(ctx, req, audio.Want{Rate: SampleRate, MaxSeconds: maxReferenceSeconds, RawRate: rawRate})
	if err != nil {
		return backends.Output{}, fmt.Errorf("sherpa: %w", err)
	}
	e, err := m.embed(ctx, a.Samples)
	if err != nil {
		return backends.Output{}, err
	}
	if e == nil {
		return backends.Output{}, backends.Invalidf("sherpa: the audio is too short for a speaker embedding")
	}
	b, err := json.Marshal(EmbeddingResult{Duration: math.Round(a.Seconds()*1000) / 1000, Dim: len(e), Embedding: e})
	if err != nil {
		return backends.Output{}, err
	}
	return backends.Output{JSON: b}, nil
}

// embed runs the slot's extractor over pcm (16 kHz) and returns the
// L2-normalised embedding, or nil when the audio is too short for one.
func (m *model) embed(ctx context.Context, pcm []int16) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := m.lib.exStream(m.ex)
	if st == 0 {
		return nil, fmt.Errorf("sherpa: could not create an embedding stream")
	}
	defer m.lib.destroyOnStr(st)
	if len(pcm) > 0 {
		p := floatSamples(pcm)
		m.lib.acceptOn(st, SampleRate, p, int32(len(pcm)))
		native.Free(p)
	}
	m.lib.onFinished(st)
	if m.lib.exReady(m.ex, st) == 0 {
		return nil, nil
	}
	v := m.lib.exCompute(m.ex, st)
	if v == 0 {
		return nil, nil
	}
	defer m.lib.exFree(v)
	e := append([]float32(nil), unsafe.Slice((*float32)(native.Ptr(v)), int(m.lib.exDim(m.ex)))...)
	var n float64
	for _, x := range e {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return nil, nil
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range e {
		e[i] *= inv
	}
	return e, nil
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range min(len(a), len(b)) {
		s += a[i] * b[i]
	}
	return s
}

func speakersOf(segs []diarizationSegment) int {
	seen := map[int32]bool{}
	for _, s := range segs {
		seen[s.Speaker] = true
	}
	return len(seen)
}
