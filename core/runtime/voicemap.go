package runtime

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

// FieldVoiceMap is the spec field of a speech model's voice map.
const FieldVoiceMap = "voice_map"

// maxVoiceName bounds a voice map's target voice name.
const maxVoiceName = 128

// CanonicalVoiceMap checks a spec's voice map: each key one of OpenAI's
// stock voice names (backends.StockVoices, in lower case), each value a
// non-empty voice name of at most 128 printable characters; it returns the
// map in core.Config's form: canonical JSON with sorted keys ("" for an
// empty or nil map). A refusal is a *SpecError naming voice_map. Whether
// each value is a voice of the model is the engine's to say (checkVoiceMap).
func CanonicalVoiceMap(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if s, ok := backends.StockVoice(k); !ok || s != k {
			return "", specErrorf(FieldVoiceMap, nil, "voice_map: %.80q is not one of OpenAI's stock voice names in lower case (%s)", k, strings.Join(backends.StockVoices, ", "))
		}
		v := m[k]
		if v == "" || len(v) > maxVoiceName || strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			return "", specErrorf(FieldVoiceMap, nil, "voice_map: %s maps to %.80q: want a voice name of 1..%d printable characters", k, v, maxVoiceName)
		}
	}
	b, err := json.Marshal(m) // keys sorted
	if err != nil {
		return "", specErrorf(FieldVoiceMap, err, "voice_map: %v", err)
	}
	return string(b), nil
}

// VoiceMapOf is core.Config.VoiceMap as a map (nil for none or, never for
// a committed config, one that does not decode).
func VoiceMapOf(c *core.Config) map[string]string {
	if c == nil || c.VoiceMap == "" {
		return nil
	}
	var m map[string]string
	if json.Unmarshal([]byte(c.VoiceMap), &m) != nil {
		return nil
	}
	return m
}

// checkVoiceMap checks that every voice m maps to is a voice of the model
// as its engine lists them from the spec's files (backends.VoiceLister),
// so a stock name never leads to a voice the engine then refuses: a
// speech (tts) model of an engine that lists its voices, else a
// *SpecError naming voice_map that says which voices there are.
func checkVoiceMap(eng backends.Engine, bs backends.Spec, m map[string]string) error {
	if len(m) == 0 {
		return nil
	}
	if bs.Task != "tts" {
		return specErrorf(FieldVoiceMap, nil, "voice_map: only a speech (tts) model has voices; this model's task is %q", bs.Task)
	}
	vl, ok := eng.(backends.VoiceLister)
	if !ok {
		return specErrorf(FieldVoiceMap, nil, "voice_map: engine %s does not list its voices, so none can be mapped", bs.Engine)
	}
	voices, err := vl.Voices(bs)
	if err != nil {
		return specErrorf(FieldVoiceMap, err, "voice_map: engine %s cannot list the checkpoint's voices: %v", bs.Engine, err)
	}
	ids := make([]string, 0, len(voices))
	for _, v := range voices {
		ids = append(ids, v.ID)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(ids, m[k]) {
			shown := ids
			if len(shown) > 32 {
				shown = append(slices.Clone(shown[:32]), fmt.Sprintf("... (%d in all)", len(ids)))
			}
			return specErrorf(FieldVoiceMap, nil, "voice_map: %s maps to %.80q, which is not a voice of checkpoint %s (have %s)", k, m[k], bs.Checkpoint, strings.Join(shown, ", "))
		}
	}
	return nil
}
