package audio

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// Diarization (engine diarize): Body or Data is the audio, as for ASR;
// Input is an optional DiarizationRequest. Output.JSON is a
// DiarizationResult, the shape speaches answers POST
// /v1/audio/diarization with.

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

// DiarizationFields lists the form fields (or query parameters) POST
// /v1/audio/diarization accepts; any other is invalid (ParseDiarization).
// known_speaker_names[] and known_speaker_references[] (OpenAI's names)
// come in pairs, in order, at most MaxKnownSpeakers; a reference is a
// file part or a data URL (data:audio/wav;base64,...).
var DiarizationFields = []string{"model", "response_format", "num_speakers", "min_speakers", "max_speakers",
	"known_speaker_names[]", "known_speaker_references[]"}

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

// knownSpeakers pairs the known_speaker_* fields (see DiarizationFields).
func knownSpeakers(fields map[string][]string) ([]KnownSpeaker, error) {
	names, refs := fields["known_speaker_names[]"], fields["known_speaker_references[]"]
	if len(names) != len(refs) {
		return nil, backends.Invalidf("known_speaker_names[] has %d entries, known_speaker_references[] %d: they come in pairs", len(names), len(refs))
	}
	var out []KnownSpeaker
	for i := range names {
		ref := []byte(refs[i])
		if rest, ok := strings.CutPrefix(refs[i], "data:"); ok {
			meta, data, ok := strings.Cut(rest, ",")
			if !ok || !strings.HasSuffix(meta, ";base64") {
				return nil, backends.Invalidf("known_speaker_references[%d]: a data URL must be base64 (data:audio/wav;base64,...)", i)
			}
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				return nil, backends.Invalidf("known_speaker_references[%d]: %v", i, err)
			}
			ref = b
		}
		out = append(out, KnownSpeaker{Name: names[i], Audio: ref})
	}
	return out, CheckKnownSpeakers(out)
}

// DiarizationParams are the checked fields of a diarization request.
type DiarizationParams struct {
	Model          string
	ResponseFormat string // "json" (the default) or "rttm"
	Request        DiarizationRequest
	KnownSpeakers  []KnownSpeaker // in the engine Input as known_speakers
}

// ParseDiarization checks the fields of a diarization request so that none
// is silently ignored: an unknown or repeated field, a count that is not a
// whole number in 1..MaxSpeakers, num_speakers beside min or max, min
// above max, or a response_format other than json or rttm is invalid. A
// field sent empty is as if not sent. in is the upload's engine input (a
// declared audio/L16 rate, or nil).
func ParseDiarization(fields map[string][]string, in json.RawMessage) (DiarizationParams, json.RawMessage, error) {
	var p DiarizationParams
	if len(in) > 0 {
		if err := DecodeStrict(in, &p.Request); err != nil {
			return p, nil, err
		}
	}
	for name, vs := range fields {
		if !slices.Contains(DiarizationFields, name) {
			return p, nil, backends.Invalidf("field %q is not supported (accepted: %s)", clip(name), strings.Join(DiarizationFields, ", "))
		}
		if name == "known_speaker_names[]" || name == "known_speaker_references[]" {
			continue // repeated by design, paired below
		}
		if len(vs) > 1 {
			return p, nil, backends.Invalidf("field %q is given %d times", name, len(vs))
		}
		v := vs[0]
		if v == "" && name != "model" {
			continue
		}
		switch name {
		case "model":
			p.Model = v
		case "response_format":
			if v != "json" && v != "rttm" {
				return p, nil, backends.Invalidf("response_format %q is not supported (json or rttm)", clip(v))
			}
			p.ResponseFormat = v
		default:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxSpeakers {
				return p, nil, backends.Invalidf("%s %q is not a whole number in 1..%d", name, clip(v), MaxSpeakers)
			}
			switch name {
			case "num_speakers":
				p.Request.NumSpeakers = n
			case "min_speakers":
				p.Request.MinSpeakers = n
			case "max_speakers":
				p.Request.MaxSpeakers = n
			}
		}
	}
	if p.ResponseFormat == "" {
		p.ResponseFormat = "json"
	}
	if err := p.Request.Check(); err != nil {
		return p, nil, err
	}
	ks, err := knownSpeakers(fields)
	if err != nil {
		return p, nil, err
	}
	p.KnownSpeakers = ks
	if len(ks) == 0 {
		b, err := json.Marshal(p.Request)
		return p, b, err
	}
	b, err := json.Marshal(struct {
		DiarizationRequest
		KnownSpeakers []KnownSpeaker `json:"known_speakers"`
	}{p.Request, ks})
	return p, b, err
}

// RTTM returns r as RTTM SPEAKER lines of file (channel 1, times to the
// millisecond), one per segment.
func (r DiarizationResult) RTTM(file string) string {
	var b strings.Builder
	for _, s := range r.Segments {
		fmt.Fprintf(&b, "SPEAKER %s 1 %.3f %.3f <NA> <NA> %s <NA> <NA>\n", file, s.Start, s.End-s.Start, s.Speaker)
	}
	return b.String()
}
