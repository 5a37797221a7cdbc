package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
)

// A speech model's voice_map maps OpenAI's stock voice names to its own
// voices: a request naming a mapped stock name is spoken in the mapped
// voice (the same bytes as naming that voice), one the map leaves out
// keeps the default voice; GET /v1/audio/voices lists what each stock
// name gets and the spec shows the map; a map naming a voice the model
// does not have, a key that is not a stock name, or a map on a model that
// has no voices is a 400 naming voice_map, before anything changes
// (CONTRACT.md names.voice-map).
func TestVoiceMap(t *testing.T) {
	ts := startEngineServer(t, nil, catalogue.EspeakEn, catalogue.PocketsphinxEnUS)
	ts.put("tts", `{"engine":"espeak","task":"tts","checkpoint":"espeak-en","slots":1}`)
	var list struct {
		Data []struct {
			Voices []struct {
				ID      string
				Default bool
			}
			VoiceMap map[string]string `json:"voice_map"`
		}
	}
	ts.must(200, "GET", "/v1/audio/voices?model=tts", "").json(t, &list)
	if len(list.Data) != 1 || len(list.Data[0].Voices) < 2 {
		t.Fatalf("voices: %+v", list)
	}
	def, other := list.Data[0].Voices[0].ID, ""
	for _, v := range list.Data[0].Voices[1:] {
		if v.ID != def && other == "" {
			other = v.ID
		}
	}
	if got := list.Data[0].VoiceMap; len(got) != 13 || got["alloy"] != def || got["cedar"] != def {
		t.Fatalf("without a voice_map every stock name is the default voice %q: %v", def, got)
	}
	speak := func(voice string) []byte {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"model": "tts", "input": "Open the door.", "voice": voice, "response_format": "pcm"})
		return ts.must(200, "POST", "/v1/audio/speech", string(b)).body
	}
	defPCM, otherPCM := speak(def), speak(other)
	if bytes.Equal(defPCM, otherPCM) {
		t.Fatalf("voices %q and %q speak the same bytes: the test cannot tell them apart", def, other)
	}
	if !bytes.Equal(speak("alloy"), defPCM) {
		t.Fatal("before the voice_map, alloy is not the default voice")
	}

	// Refused before anything changes, naming voice_map.
	for _, spec := range []string{
		`{"engine":"espeak","task":"tts","checkpoint":"espeak-en","slots":1,"voice_map":{"alloy":"no-such-voice"}}`,
		`{"engine":"espeak","task":"tts","checkpoint":"espeak-en","slots":1,"voice_map":{"robot":"` + other + `"}}`,
		`{"engine":"espeak","task":"tts","checkpoint":"espeak-en","slots":1,"voice_map":{"alloy":""}}`,
	} {
		r := ts.do("PUT", "/v1/models/tts", spec)
		var b errorBody
		if err := json.Unmarshal(r.body, &b); err != nil || r.status != 400 || b.Error.Param != "voice_map" {
			t.Errorf("PUT %s: %d %s; want 400 naming voice_map", spec, r.status, r.body)
		}
	}
	r := ts.do("PUT", "/v1/models/asr", `{"engine":"pocketsphinx","task":"asr","checkpoint":"pocketsphinx-en-us","slots":1,"voice_map":{"alloy":"x"}}`)
	if b := (errorBody{}); json.Unmarshal(r.body, &b) != nil || r.status != 400 || b.Error.Param != "voice_map" {
		t.Errorf("voice_map on an asr model: %d %s; want 400 naming voice_map", r.status, r.body)
	}
	if m := ts.model("tts"); m.ConfigVersion != 1 {
		t.Fatalf("a refused voice_map changed the model: version %d", m.ConfigVersion)
	}

	if m := ts.put("tts", `{"engine":"espeak","task":"tts","checkpoint":"espeak-en","slots":1,"voice_map":{"alloy":"`+other+`","shimmer":"`+def+`"}}`); m.ConfigVersion != 2 {
		t.Fatalf("a voice_map change committed version %d, want 2", m.ConfigVersion)
	}
	for _, c := range []struct {
		voice string
		want  []byte
	}{{"alloy", otherPCM}, {"Alloy", otherPCM}, {"shimmer", defPCM}, {"ash", defPCM}, {def, defPCM}, {other, otherPCM}} {
		if !bytes.Equal(speak(c.voice), c.want) {
			t.Errorf("voice %q: not the voice the map gives it", c.voice)
		}
	}
	ts.must(200, "GET", "/v1/audio/voices?model=tts", "").json(t, &list)
	if got := list.Data[0].VoiceMap; got["alloy"] != other || got["shimmer"] != def || got["ash"] != def {
		t.Errorf("voices list the map as %v", got)
	}
	var spec ModelSpec
	ts.must(200, "GET", "/v1/models/tts/spec", "").json(t, &spec)
	if spec.VoiceMap["alloy"] != other || len(spec.VoiceMap) != 2 {
		t.Errorf("the spec shows voice_map %v", spec.VoiceMap)
	}
}
