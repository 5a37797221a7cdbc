package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
)

// The wire shape of POST /v1/audio/diarization (speaches' route): its form
// fields, mapped onto the engine's audio.DiarizationRequest, and its rttm
// answer.

// DiarizationFields lists the form fields (or query parameters) POST
// /v1/audio/diarization accepts; any other is invalid (ParseDiarization).
// known_speaker_names[] and known_speaker_references[] (OpenAI's names)
// come in pairs, in order, at most audio.MaxKnownSpeakers; a reference is a
// file part or a data URL (data:audio/wav;base64,...).
var DiarizationFields = []string{"model", "response_format", "num_speakers", "min_speakers", "max_speakers",
	"known_speaker_names[]", "known_speaker_references[]"}

// knownSpeakers pairs the known_speaker_* fields (see DiarizationFields).
func knownSpeakers(fields map[string][]string) ([]audio.KnownSpeaker, error) {
	names, refs := fields["known_speaker_names[]"], fields["known_speaker_references[]"]
	if len(names) != len(refs) {
		return nil, backends.InvalidParam("known_speaker_names[]", "known_speaker_names[] has %d entries, known_speaker_references[] %d: they come in pairs", len(names), len(refs))
	}
	var out []audio.KnownSpeaker
	for i := range names {
		ref := []byte(refs[i])
		if rest, ok := strings.CutPrefix(refs[i], "data:"); ok {
			meta, data, ok := strings.Cut(rest, ",")
			if !ok || !strings.HasSuffix(meta, ";base64") {
				return nil, backends.InvalidParam("known_speaker_references[]", "known_speaker_references[%d]: a data URL must be base64 (data:audio/wav;base64,...)", i)
			}
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				return nil, backends.InvalidParam("known_speaker_references[]", "known_speaker_references[%d]: %v", i, err)
			}
			ref = b
		}
		out = append(out, audio.KnownSpeaker{Name: names[i], Audio: ref})
	}
	return out, audio.CheckKnownSpeakers(out)
}

// DiarizationParams are the checked fields of a diarization request.
type DiarizationParams struct {
	Model          string
	ResponseFormat string // "json" (the default) or "rttm"
	Request        audio.DiarizationRequest
	KnownSpeakers  []audio.KnownSpeaker // in the engine Input as known_speakers
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
		if err := audio.DecodeStrict(in, &p.Request); err != nil {
			return p, nil, err
		}
	}
	for name, vs := range fields {
		if !slices.Contains(DiarizationFields, name) {
			return p, nil, backends.InvalidParam(clip(name), "field %q is not supported (accepted: %s)", clip(name), strings.Join(DiarizationFields, ", "))
		}
		if name == "known_speaker_names[]" || name == "known_speaker_references[]" {
			continue // repeated by design, paired below
		}
		if len(vs) > 1 {
			return p, nil, backends.InvalidParam(name, "field %q is given %d times", name, len(vs))
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
				return p, nil, backends.InvalidParam("response_format", "response_format %q is not supported (json or rttm)", clip(v))
			}
			p.ResponseFormat = v
		default:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > audio.MaxSpeakers {
				return p, nil, backends.InvalidParam(name, "%s %q is not a whole number in 1..%d", name, clip(v), audio.MaxSpeakers)
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
		audio.DiarizationRequest
		KnownSpeakers []audio.KnownSpeaker `json:"known_speakers"`
	}{p.Request, ks})
	return p, b, err
}

// RTTM returns r as RTTM SPEAKER lines of file (channel 1, times to the
// millisecond), one per segment: the answer of response_format rttm.
func RTTM(r audio.DiarizationResult, file string) string {
	var b strings.Builder
	for _, s := range r.Segments {
		fmt.Fprintf(&b, "SPEAKER %s 1 %.3f %.3f <NA> <NA> %s <NA> <NA>\n", file, s.Start, s.End-s.Start, s.Speaker)
	}
	return b.String()
}
