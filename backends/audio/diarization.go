package audio

import (
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// Diarization (engine diarize): Body or Data is the audio, as for ASR;
// Input is an optional DiarizationRequest. Output.JSON is a
// DiarizationResult, the shape speaches answers POST
// /v1/audio/diarization with. Known speakers, when asked, go in Input as
// known_speakers ([]KnownSpeaker). The route's form fields and its rttm
// answer are the HTTP layer's (server/internal/openai).

// MaxSpeakers bounds every speaker-count option of a diarization request.
const MaxSpeakers = 32

// DiarizationRequest is the optional Input of a diarization request. Zero
// fields are unset: num_speakers fixes the count; otherwise min_speakers
// and max_speakers bound the count the engine's threshold finds.
type DiarizationRequest struct {
	SampleRate  int `json:"sample_rate,omitempty"` // as AudioRequest's
	NumSpeakers int `json:"num_speakers,omitempty"`
	MinSpeakers int `json:"min_speakers,omitempty"`
	MaxSpeakers int `json:"max_speakers,omitempty"`
}

// Check refuses nonsense counts: outside 1..MaxSpeakers, num_speakers
// with min_speakers or max_speakers, min_speakers above max_speakers.
func (r DiarizationRequest) Check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"num_speakers", r.NumSpeakers}, {"min_speakers", r.MinSpeakers}, {"max_speakers", r.MaxSpeakers}} {
		if f.v < 0 || f.v > MaxSpeakers {
			return backends.Invalidf("%s %d outside 1..%d", f.name, f.v, MaxSpeakers)
		}
	}
	if r.NumSpeakers > 0 && (r.MinSpeakers > 0 || r.MaxSpeakers > 0) {
		return backends.Invalidf("num_speakers excludes min_speakers and max_speakers")
	}
	if r.MinSpeakers > 0 && r.MaxSpeakers > 0 && r.MinSpeakers > r.MaxSpeakers {
		return backends.Invalidf("min_speakers %d above max_speakers %d", r.MinSpeakers, r.MaxSpeakers)
	}
	return nil
}

// Bounds returns the speaker-count bounds of r (1..MaxSpeakers when unset).
func (r DiarizationRequest) Bounds() (lo, hi int) {
	if r.NumSpeakers > 0 {
		return r.NumSpeakers, r.NumSpeakers
	}
	lo, hi = max(1, r.MinSpeakers), MaxSpeakers
	if r.MaxSpeakers > 0 {
		hi = r.MaxSpeakers
	}
	return lo, hi
}

// DiarizationSegment is one speaker turn, in seconds.
type DiarizationSegment struct {
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Speaker string  `json:"speaker"` // SPEAKER_00, SPEAKER_01, ... in order of first appearance
}

// DiarizationResult is the Output.JSON of a diarization request.
type DiarizationResult struct {
	Duration float64              `json:"duration"` // seconds of audio
	Segments []DiarizationSegment `json:"segments"`
}

// Known speakers bounds: how many, a name's length, a reference's bytes.
const (
	MaxKnownSpeakers     = 4
	MaxKnownSpeakerName  = 64
	MaxKnownSpeakerBytes = 1 << 20
)

// KnownSpeaker is one named reference sample. An engine that cannot
// match speakers refuses an Input that has them (its strict decoding
// names the field known_speakers).
type KnownSpeaker struct {
	Name  string `json:"name"`
	Audio []byte `json:"audio"` // the reference's file: WAV, FLAC, ... as for ASR
}

// CheckKnownSpeakers bounds ks: at most MaxKnownSpeakers, each with a
// distinct printable name of 1..MaxKnownSpeakerName bytes and audio of
// 1..MaxKnownSpeakerBytes bytes.
func CheckKnownSpeakers(ks []KnownSpeaker) error {
	if len(ks) > MaxKnownSpeakers {
		return backends.Invalidf("known_speaker_names[]: %d known speakers, at most %d", len(ks), MaxKnownSpeakers)
	}
	seen := map[string]bool{}
	for i, k := range ks {
		switch {
		case k.Name == "" || len(k.Name) > MaxKnownSpeakerName || strings.ContainsFunc(k.Name, func(r rune) bool { return r < ' ' || r == 0x7f }):
			return backends.Invalidf("known_speaker_names[%d]: a name of 1..%d printable bytes", i, MaxKnownSpeakerName)
		case seen[k.Name]:
			return backends.Invalidf("known_speaker_names[%d]: %q given twice", i, clip(k.Name))
		case len(k.Audio) == 0 || len(k.Audio) > MaxKnownSpeakerBytes:
			return backends.Invalidf("known_speaker_references[%d]: 1..%d bytes of audio", i, MaxKnownSpeakerBytes)
		}
		seen[k.Name] = true
	}
	return nil
}

// clip shortens a client's string for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
