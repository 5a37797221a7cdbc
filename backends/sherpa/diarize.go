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

// diarize answers one diarization request on this slot's object.
func (m *model) diarize(ctx context.Context, req backends.Request) (backends.Output, error) {
	var r audio.DiarizationRequest
	if err := audio.DecodeStrict(req.Input, &r); err != nil {
		return backends.Output{}, err
	}
	if err := r.Check(); err != nil {
		return backends.Output{}, err
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
	for _, s := range segs {
		name, ok := names[s.Speaker]
		if !ok {
			name = fmt.Sprintf("SPEAKER_%02d", len(names))
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

func speakersOf(segs []diarizationSegment) int {
	seen := map[int32]bool{}
	for _, s := range segs {
		seen[s.Speaker] = true
	}
	return len(seen)
}
